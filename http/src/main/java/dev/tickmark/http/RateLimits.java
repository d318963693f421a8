package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import com.typesafe.config.Config;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.RemoteAddress;
import org.apache.pekko.http.javadsl.model.headers.RetryAfter;
import org.apache.pekko.http.javadsl.model.headers.XForwardedFor;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * The node's request rate limits (DESIGN.md "Limits and transport security"), per node: per API key
 * for authenticated requests, per client address for unauthenticated POSTs (sign-up). Past a limit:
 * 429 {@code rate_limited} with {@code Retry-After}. A key is counted by a SHA-256 of what was
 * presented, never the key itself. Operator endpoints and the agent's socket keep their own limits
 * ({@code tickmark.agent-socket}).
 */
public final class RateLimits {

  /**
   * {@code tickmark.http.rate-limits}: the two rates, how many keys and addresses each limiter
   * tracks, and the proxies whose {@code X-Forwarded-For} is believed (none by default).
   */
  public record Settings(
      RateLimiter.Rate perKey,
      RateLimiter.Rate perAddress,
      int maxEntries,
      Set<InetAddress> trustedProxies) {

    public static Settings fromConfig(Config config) {
      Config c = config.getConfig("tickmark.http.rate-limits");
      return new Settings(
          new RateLimiter.Rate(c.getDouble("per-key.per-second"), c.getInt("per-key.burst")),
          new RateLimiter.Rate(
              c.getDouble("per-address.per-second"), c.getInt("per-address.burst")),
          c.getInt("max-entries"),
          addresses(c.getString("trusted-proxies")));
    }

    /**
     * Comma-separated IP literals; a host name is refused (it would be looked up, and a proxy's
     * address must not depend on DNS).
     */
    static Set<InetAddress> addresses(String list) {
      Set<InetAddress> out = new HashSet<>();
      for (String part : list.split(",")) {
        String a = part.strip();
        if (a.isEmpty()) continue;
        if (!a.matches("[0-9.]+|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*"))
          throw new IllegalArgumentException(
              "tickmark.http.rate-limits.trusted-proxies (TICKMARK_TRUSTED_PROXIES) takes IP"
                  + " addresses, got \""
                  + a
                  + "\"");
        try {
          out.add(InetAddress.getByName(a));
        } catch (java.net.UnknownHostException e) {
          throw new IllegalArgumentException(
              "tickmark.http.rate-limits.trusted-proxies: \"" + a + "\" is not an IP address");
        }
      }
      return Set.copyOf(out);
    }
  }

  private final Settings settings;
  private final RateLimiter perKey;
  private final RateLimiter perAddress;

  public RateLimits(Settings settings) {
    this(settings, System::nanoTime);
  }

  RateLimits(Settings settings, LongSupplier nanoTime) {
    this.settings = settings;
    this.perKey = new RateLimiter(settings.perKey(), settings.maxEntries(), nanoTime);
    this.perAddress = new RateLimiter(settings.perAddress(), settings.maxEntries(), nanoTime);
  }

  /** Runs {@code inner} if the presented API key has a request left, else answers 429. */
  public Route perKey(String presentedKey, Supplier<Route> inner) {
    long retryAfter = perKey.tryAcquire(new KeyHash(sha256(presentedKey)));
    return retryAfter == 0
        ? inner.get()
        : rateLimited(retryAfter, "too many requests with this API key");
  }

  /**
   * Runs {@code inner} if the client's address has a request left, else answers 429; for requests
   * that carry no credential (sign-up).
   */
  public Route perAddress(Supplier<Route> inner) {
    return extractRequest(
        request -> {
          long retryAfter = perAddress.tryAcquire(client(request, settings.trustedProxies()));
          return retryAfter == 0
              ? inner.get()
              : rateLimited(retryAfter, "too many requests from this address");
        });
  }

  static Route rateLimited(long retryAfterSeconds, String why) {
    return complete(
        new Problem(429, "rate_limited", why + "; retry in " + retryAfterSeconds + " s")
            .toResponse()
            .addHeader(RetryAfter.create(retryAfterSeconds)));
  }

  /**
   * The client's address: the TCP peer ({@code remote-address-attribute}); only when that peer is a
   * trusted proxy, the last address its {@code X-Forwarded-For} names that is not itself a trusted
   * proxy (the one the nearest proxy saw). IPv6 clients count per /64.
   */
  static InetAddress client(HttpRequest request, Set<InetAddress> trustedProxies) {
    InetAddress peer =
        request
            .getAttribute(org.apache.pekko.http.javadsl.model.AttributeKeys.remoteAddress)
            .flatMap(RemoteAddress::getAddress)
            .orElse(InetAddress.getLoopbackAddress());
    if (trustedProxies.contains(peer)) {
      Optional<XForwardedFor> forwarded = request.getHeader(XForwardedFor.class);
      if (forwarded.isPresent()) {
        List<InetAddress> hops = new java.util.ArrayList<>();
        for (RemoteAddress hop : forwarded.get().getAddresses())
          hop.getAddress().ifPresent(hops::add);
        for (int i = hops.size() - 1; i >= 0; i--) {
          if (!trustedProxies.contains(hops.get(i))) return perSlash64(hops.get(i));
        }
      }
    }
    return perSlash64(peer);
  }

  /** IPv4 as it is; IPv6 by its /64 (one host's addresses), as the agent socket counts. */
  static InetAddress perSlash64(InetAddress address) {
    if (!(address instanceof java.net.Inet6Address)) return address;
    byte[] prefix = Arrays.copyOf(address.getAddress(), 16);
    Arrays.fill(prefix, 8, 16, (byte) 0);
    try {
      return InetAddress.getByAddress(prefix);
    } catch (java.net.UnknownHostException e) {
      return address; // 16 bytes are always an address
    }
  }

  /** The key's digest as a map key (arrays compare by identity). */
  private record KeyHash(byte[] digest) {
    @Override
    public boolean equals(Object o) {
      return o instanceof KeyHash k && Arrays.equals(digest, k.digest);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(digest);
    }

    @Override
    public String toString() {
      return "KeyHash";
    }
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
