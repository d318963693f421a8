package dev.tickmark.agent.ssh;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;

/**
 * {@code java -cp <agent> dev.tickmark.agent.ssh.NetPipe HOST PORT}: connects to {@code HOST:PORT}
 * and pipes stdin to the connection and the connection to stdout, each way until its end (then
 * half-closes), exit status 0; 1 when it cannot connect. The sandbox runtime's relay for a
 * forwarded port where {@code socat} is not installed: started inside a sandbox's network namespace
 * ({@code nsenter --net}), which a thread of the agent itself cannot join.
 */
public final class NetPipe {
  private NetPipe() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: NetPipe HOST PORT");
      System.exit(2);
    }
    Socket socket;
    try {
      socket = new Socket(args[0], Integer.parseInt(args[1]));
    } catch (IOException | NumberFormatException e) {
      System.err.println("NetPipe: cannot connect to " + args[0] + ":" + args[1] + ": " + e);
      System.exit(1);
      return;
    }
    Thread up =
        new Thread(
            () -> {
              try {
                copy(System.in, socket.getOutputStream());
                socket.shutdownOutput();
              } catch (IOException e) {
                // the connection is gone
              }
            });
    up.setDaemon(true);
    up.start();
    try {
      copy(socket.getInputStream(), System.out);
    } catch (IOException e) {
      // the connection is gone
    }
    System.out.flush();
    System.exit(0); // the connection's end ends the pipe, even while stdin stays open
  }

  static void copy(InputStream in, OutputStream out) throws IOException {
    byte[] buf = new byte[32 * 1024];
    for (int n; (n = in.read(buf)) >= 0; ) {
      out.write(buf, 0, n);
      out.flush();
    }
  }
}
