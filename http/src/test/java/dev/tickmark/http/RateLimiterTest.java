package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.http.javadsl.model.AttributeKeys;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.RemoteAddress;
import org.apache.pekko.http.javadsl.model.headers.XForwardedFor;
import org.junit.jupiter.api.Test;

/** The API's token buckets, on a clock the test moves; and whose address a request counts as. */
class RateLimiterTest {
  private static final long SECOND = 1_000_000_000L;
  private final AtomicLong now = new AtomicLong(7 * SECOND);

  private RateLimiter limiter(double perSecond, int burst, int maxEntries) {
    return new RateLimiter(new RateLimiter.Rate(perSecond, burst), maxEntries, now::get);
  }

  @Test
  void aBurstIsAllowedThenRequestsAtTheRefillRate() {
    RateLimiter l = limiter(20, 100, 10);
    for (int i = 0; i < 100; i++) assertEquals(0, l.tryAcquire("k"), "request " + i);
    assertEquals(1, l.tryAcquire("k"), "the 101st waits: Retry-After is at least 1 s");
    now.addAndGet(SECOND / 20); // one token at 20 a second
    assertEquals(0, l.tryAcquire("k"));
    assertEquals(1, l.tryAcquire("k"));
    now.addAndGet(10 * SECOND); // refilled to the burst, never beyond
    for (int i = 0; i < 100; i++) assertEquals(0, l.tryAcquire("k"));
    assertEquals(1, l.tryAcquire("k"));
  }

  @Test
  void retryAfterIsTheWholeSecondsUntilTheNextToken() {
    RateLimiter l = limiter(0.1, 2, 10); // one every 10 s
    assertEquals(0, l.tryAcquire("a"));
    assertEquals(0, l.tryAcquire("a"));
    assertEquals(10, l.tryAcquire("a"));
    now.addAndGet(7 * SECOND + SECOND / 2);
    assertEquals(3, l.tryAcquire("a"), "2.5 s left, rounded up");
    now.addAndGet(2 * SECOND + SECOND / 2);
    assertEquals(0, l.tryAcquire("a"));
  }

  @Test
  void eachKeyHasItsOwnBucket() {
    RateLimiter l = limiter(1, 1, 10);
    assertEquals(0, l.tryAcquire("a"));
    assertEquals(1, l.tryAcquire("a"));
    assertEquals(0, l.tryAcquire("b"), "another key is unaffected");
  }

  @Test
  void memoryIsBoundedIdleBucketsAreDroppedAndNewKeysShareOneWhenFull() {
    RateLimiter l = limiter(1, 2, 3);
    for (String k : new String[] {"a", "b", "c"}) assertEquals(0, l.tryAcquire(k));
    assertEquals(3, l.tracked());
    // no bucket has refilled: new keys share the overflow bucket and the map does not grow
    assertEquals(0, l.tryAcquire("d"));
    assertEquals(0, l.tryAcquire("e"));
    assertEquals(1, l.tryAcquire("f"), "d, e and f drew from one bucket of 2");
    assertEquals(3, l.tracked());
    // a, b and c have refilled (idle): they are dropped and a new key gets a bucket of its own
    now.addAndGet(5 * SECOND);
    assertEquals(0, l.tryAcquire("g"));
    assertEquals(0, l.tryAcquire("g"));
    assertEquals(1, l.tryAcquire("g"));
    assertTrue(l.tracked() <= 3, "tracked " + l.tracked());
  }

  @Test
  void refusesRatesThatCouldNeverAdmitARequest() {
    assertThrows(IllegalArgumentException.class, () -> new RateLimiter.Rate(0, 10));
    assertThrows(IllegalArgumentException.class, () -> new RateLimiter.Rate(1, 0));
  }

  private static HttpRequest from(String peer, String forwardedFor) throws Exception {
    HttpRequest r =
        HttpRequest.create("/v1/accounts")
            .addAttribute(
                AttributeKeys.remoteAddress, RemoteAddress.create(InetAddress.getByName(peer)));
    if (forwardedFor == null) return r;
    // as the server's parser makes it from the header line
    RemoteAddress[] hops =
        java.util.Arrays.stream(forwardedFor.split(","))
            .map(String::strip)
            .map(RateLimiterTest::address)
            .toArray(RemoteAddress[]::new);
    return r.addHeader(XForwardedFor.create(hops));
  }

  private static RemoteAddress address(String ip) {
    try {
      return RemoteAddress.create(InetAddress.getByName(ip));
    } catch (java.net.UnknownHostException e) {
      throw new IllegalArgumentException(e);
    }
  }

  @Test
  void theClientIsTheTcpPeerAndXForwardedForCountsOnlyFromATrustedProxy() throws Exception {
    Set<InetAddress> none = Set.of();
    Set<InetAddress> proxy = Set.of(InetAddress.getByName("10.0.0.1"));
    assertEquals(
        "192.0.2.9",
        RateLimits.client(from("192.0.2.9", "198.51.100.1"), none).getHostAddress(),
        "a forged header from a client is ignored");
    assertEquals(
        "192.0.2.9",
        RateLimits.client(from("192.0.2.9", "198.51.100.1"), proxy).getHostAddress(),
        "a peer that is not the trusted proxy");
    assertEquals(
        "198.51.100.1",
        RateLimits.client(from("10.0.0.1", "203.0.113.5, 198.51.100.1"), proxy).getHostAddress(),
        "from the proxy: the address the proxy saw (the last), not what the client claimed");
    assertEquals(
        "10.0.0.1",
        RateLimits.client(from("10.0.0.1", null), proxy).getHostAddress(),
        "the proxy without the header counts as itself");
    assertEquals(
        InetAddress.getByName("2001:db8:1:2::"),
        RateLimits.client(from("2001:db8:1:2:aaaa::1", null), none),
        "IPv6 per /64");
  }

  @Test
  void trustedProxiesAreIpAddressesNeverNames() {
    assertEquals(2, RateLimits.Settings.addresses(" 10.0.0.1, ::1 ,").size());
    assertEquals(Set.of(), RateLimits.Settings.addresses(""));
    assertThrows(
        IllegalArgumentException.class, () -> RateLimits.Settings.addresses("proxy.internal"));
  }
}
