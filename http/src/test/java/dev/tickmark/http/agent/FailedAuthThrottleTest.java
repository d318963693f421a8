package dev.tickmark.http.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The per-address bucket of failed agent authentications, on a clock the test moves. */
class FailedAuthThrottleTest {
  private static final long SECOND = 1_000_000_000L;
  private final AtomicLong now = new AtomicLong(42 * SECOND);

  private FailedAuthThrottle throttle(double perSecond, int burst, int maxAddresses) {
    return new FailedAuthThrottle(
        new FailedAuthThrottle.Settings(perSecond, burst, maxAddresses), now::get);
  }

  private static InetAddress ip(String address) throws Exception {
    return InetAddress.getByName(address);
  }

  @Test
  void aBurstOfFailuresThenOneAsTheBucketRefills() throws Exception {
    FailedAuthThrottle t = throttle(2, 3, 100);
    InetAddress a = ip("192.0.2.1");
    for (int i = 0; i < 3; i++) assertTrue(t.tryAcquire(a).allowed());
    FailedAuthThrottle.Attempt refused = t.tryAcquire(a);
    assertFalse(refused.allowed());
    assertEquals(1, refused.retryAfterSeconds());
    now.addAndGet(SECOND / 2); // one token at 2 a second
    assertTrue(t.tryAcquire(a).allowed());
    assertFalse(t.tryAcquire(a).allowed());
    // another address has its own bucket
    assertTrue(t.tryAcquire(ip("192.0.2.2")).allowed());
  }

  @Test
  void retryAfterSaysWhenATokenIsBack() throws Exception {
    FailedAuthThrottle t = throttle(0.1, 1, 100);
    InetAddress a = ip("192.0.2.1");
    assertTrue(t.tryAcquire(a).allowed());
    assertEquals(10, t.tryAcquire(a).retryAfterSeconds());
    now.addAndGet(4 * SECOND);
    assertEquals(6, t.tryAcquire(a).retryAfterSeconds());
  }

  @Test
  void aRefundedAttemptDoesNotCount() throws Exception {
    FailedAuthThrottle t = throttle(0.001, 2, 100);
    InetAddress a = ip("192.0.2.1");
    for (int i = 0; i < 10; i++) t.tryAcquire(a).refund();
    assertTrue(t.tryAcquire(a).allowed());
    assertTrue(t.tryAcquire(a).allowed());
    FailedAuthThrottle.Attempt refused = t.tryAcquire(a);
    refused.refund(); // a refused attempt took nothing, so gives nothing back
    assertFalse(t.tryAcquire(a).allowed());
  }

  @Test
  void ipv6AddressesCountPerSlash64() throws Exception {
    FailedAuthThrottle t = throttle(0.001, 1, 100);
    assertTrue(t.tryAcquire(ip("2001:db8:1:2::1")).allowed());
    assertFalse(t.tryAcquire(ip("2001:db8:1:2:ffff::9")).allowed(), "same /64");
    assertTrue(t.tryAcquire(ip("2001:db8:1:3::1")).allowed(), "another /64");
  }

  @Test
  void theAddressTableIsBoundedAndIdleAddressesMakeRoom() throws Exception {
    FailedAuthThrottle t = throttle(1, 2, 3);
    for (int i = 1; i <= 3; i++) assertTrue(t.tryAcquire(ip("192.0.2." + i)).allowed());
    assertEquals(3, t.tracked());
    // a fourth address while the table is full of recent failures shares the overflow bucket
    assertTrue(t.tryAcquire(ip("192.0.2.4")).allowed());
    assertTrue(t.tryAcquire(ip("192.0.2.5")).allowed());
    assertFalse(t.tryAcquire(ip("192.0.2.6")).allowed(), "the overflow bucket is one client");
    assertEquals(3, t.tracked());
    // once the first three have refilled, they are dropped and new addresses get their own bucket
    now.addAndGet(2 * SECOND);
    assertTrue(t.tryAcquire(ip("192.0.2.7")).allowed());
    assertEquals(1, t.tracked());
  }
}
