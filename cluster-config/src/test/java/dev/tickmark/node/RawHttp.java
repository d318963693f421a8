package dev.tickmark.node;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * HTTP/1.1 over a plain socket, for requests {@link java.net.http.HttpClient} refuses to send:
 * bytes that are not ASCII in the request line and headers, lying or doubled {@code
 * Content-Length}, headers over the node's limits. One request per connection ({@code Connection:
 * close}); the answer is read to the end of its body.
 */
final class RawHttp {
  /** One answer: status, headers (names in lower case, the last value of each) and body. */
  record Answer(int status, Map<String, String> headers, byte[] body) {
    String contentType() {
      return headers.get("content-type");
    }

    String text() {
      return new String(body, StandardCharsets.UTF_8);
    }
  }

  /** A header as bytes on the wire: name, colon, space, value (ISO-8859-1 or raw bytes). */
  record Header(String name, byte[] value) {
    static Header of(String name, String value) {
      return new Header(name, value.getBytes(StandardCharsets.UTF_8));
    }
  }

  private RawHttp() {}

  /**
   * Sends one request and reads its answer. {@code body} goes after the headers as it is; {@code
   * Content-Length} is added with its real length unless {@code headers} name one themselves (a
   * lie). With {@code closeAfterBody} the client half-closes once the body is written: a request
   * whose {@code Content-Length} promises more than was sent then meets the end of the stream.
   *
   * <p>A node that refuses a body before reading all of it (413) closes the connection, and the
   * kernel may reset it while the answer is still unread here: the request is then sent again, up
   * to three times, as {@link ApiClient} does.
   */
  static Answer send(
      String baseUrl,
      String method,
      byte[] target,
      List<Header> headers,
      byte[] body,
      boolean closeAfterBody) {
    URI base = URI.create(baseUrl);
    IOException last = null;
    for (int attempt = 0; attempt < 3; attempt++) {
      try (Socket socket = new Socket()) {
        socket.connect(new InetSocketAddress(base.getHost(), base.getPort()), 5_000);
        socket.setSoTimeout(25_000);
        OutputStream out = socket.getOutputStream();
        ByteArrayOutputStream request = new ByteArrayOutputStream();
        request.writeBytes((method + " ").getBytes(StandardCharsets.ISO_8859_1));
        request.writeBytes(target);
        request.writeBytes(
            (" HTTP/1.1\r\nHost: " + base.getHost() + ":" + base.getPort() + "\r\n")
                .getBytes(StandardCharsets.ISO_8859_1));
        request.writeBytes("Connection: close\r\n".getBytes(StandardCharsets.ISO_8859_1));
        boolean ownLength =
            headers.stream().anyMatch(h -> h.name().equalsIgnoreCase("Content-Length"));
        if (body != null && !ownLength)
          request.writeBytes(
              ("Content-Length: " + body.length + "\r\n").getBytes(StandardCharsets.ISO_8859_1));
        for (Header h : headers) {
          request.writeBytes((h.name() + ": ").getBytes(StandardCharsets.ISO_8859_1));
          request.writeBytes(h.value());
          request.writeBytes(new byte[] {'\r', '\n'});
        }
        request.writeBytes(new byte[] {'\r', '\n'});
        if (body != null) request.writeBytes(body);
        try {
          out.write(request.toByteArray());
          out.flush();
          if (closeAfterBody) socket.shutdownOutput();
        } catch (IOException e) {
          // refused while writing: the answer may still be there to read
        }
        return read(socket.getInputStream());
      } catch (IOException e) {
        last = e;
      }
    }
    throw new AssertionError(method + " " + shown(target) + ": no answer: " + last, last);
  }

  static String shown(byte[] target) {
    String s = new String(target, StandardCharsets.ISO_8859_1);
    return s.length() > 200 ? s.substring(0, 200) + "…(" + s.length() + ")" : s;
  }

  private static Answer read(InputStream in) throws IOException {
    ByteArrayOutputStream head = new ByteArrayOutputStream();
    int last4 = 0;
    while (last4 != 0x0d0a0d0a) {
      int b = in.read();
      if (b < 0) throw new IOException("the connection ended before an answer's headers");
      head.write(b);
      last4 = (last4 << 8) | b;
    }
    String[] lines = head.toString(StandardCharsets.ISO_8859_1).split("\r\n");
    int status = Integer.parseInt(lines[0].split(" ")[1]);
    Map<String, String> headers = new LinkedHashMap<>();
    for (int i = 1; i < lines.length; i++) {
      int colon = lines[i].indexOf(':');
      if (colon > 0)
        headers.put(
            lines[i].substring(0, colon).trim().toLowerCase(Locale.ROOT),
            lines[i].substring(colon + 1).trim());
    }
    // a websocket that was accepted: nothing more to read
    if (status == 101) return new Answer(status, headers, new byte[0]);
    byte[] body;
    if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
      body = readChunked(in);
    } else if (headers.containsKey("content-length")) {
      body = in.readNBytes(Integer.parseInt(headers.get("content-length")));
    } else {
      body = in.readAllBytes();
    }
    return new Answer(status, headers, body);
  }

  private static byte[] readChunked(InputStream in) throws IOException {
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    while (true) {
      StringBuilder size = new StringBuilder();
      for (int b = in.read(); b != '\n'; b = in.read()) {
        if (b < 0) return body.toByteArray();
        if (b != '\r') size.append((char) b);
      }
      int semicolon = size.indexOf(";");
      int n = Integer.parseInt(semicolon < 0 ? size.toString() : size.substring(0, semicolon), 16);
      if (n == 0) return body.toByteArray();
      body.writeBytes(in.readNBytes(n));
      in.readNBytes(2);
    }
  }
}
