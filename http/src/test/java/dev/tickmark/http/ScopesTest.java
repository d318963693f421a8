package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class ScopesTest {
  @Test
  void everyRouteNeedsTheScopeItsEffectCallsFor() {
    assertEquals("read", Scopes.required("GET", "/v1/account"));
    assertEquals("read", Scopes.required("GET", "/v1/rentals/rnt_1/logs"));
    assertEquals("read", Scopes.required("GET", "/v1/account/api-keys"));
    assertEquals("rent", Scopes.required("GET", "/v1/rentals/rnt_1/connect"), "a shell is no read");
    assertEquals("rent", Scopes.required("POST", "/v1/rentals"));
    assertEquals("rent", Scopes.required("POST", "/v1/rentals/rnt_1/stop"));
    assertEquals("rent", Scopes.required("PUT", "/v1/account/spend-cap"));
    assertEquals("rent", Scopes.required("POST", "/v1/account/ssh-keys"));
    assertEquals("provide", Scopes.required("POST", "/v1/hosts/registration-tokens"));
    assertEquals("provide", Scopes.required("PUT", "/v1/hosts/host_1/listing"));
    assertEquals("payouts", Scopes.required("PUT", "/v1/account/payout-details"));
    assertEquals("payouts", Scopes.required("POST", "/v1/account/api-keys"));
    assertEquals("payouts", Scopes.required("DELETE", "/v1/account/api-keys/abc"));
    assertEquals("read", Scopes.required("GET", "/v1/snapshots"));
    assertEquals("read", Scopes.required("GET", "/v1/snapshots/snap_1"));
    assertEquals(
        "rent", Scopes.required("DELETE", "/v1/snapshots/snap_1"), "deleting stops billing");
    assertEquals(
        "rent", Scopes.required("POST", "/v1/something-new"), "a new route defaults to rent");
  }
}
