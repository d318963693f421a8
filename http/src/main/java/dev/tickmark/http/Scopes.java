package dev.tickmark.http;

/**
 * What an API key must be allowed to do for a request ({@code read}, {@code rent}, {@code provide},
 * {@code payouts}): one rule for every route, decided from the method and the path, so a route
 * added later cannot forget it. Reading is {@code read}, except a shell ({@code connect}), which is
 * {@code rent}; changing hosts and listings is {@code provide}; where earnings are paid and who
 * holds keys is {@code payouts} (the most trusted scope: only such a key can mint keys, so no key
 * can grant itself more); everything else that changes something is {@code rent}.
 */
final class Scopes {
  private Scopes() {}

  static String required(String method, String path) {
    boolean reads = method.equals("GET") || method.equals("HEAD");
    if (path.startsWith("/v1/rentals/") && path.endsWith("/connect")) return "rent";
    if (reads) return "read";
    if (path.equals("/v1/account/payout-details") || path.startsWith("/v1/account/api-keys"))
      return "payouts";
    if (path.equals("/v1/hosts") || path.startsWith("/v1/hosts/")) return "provide";
    return "rent";
  }
}
