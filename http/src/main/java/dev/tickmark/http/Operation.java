package dev.tickmark.http;

import java.util.List;
import java.util.stream.Stream;

/**
 * One operation the node serves: an HTTP method and its path as an OpenAPI template ({@code
 * /v1/rentals/{id}/stop}). Each routes class lists its own next to its {@code route()}, {@link
 * HttpApi#OPERATIONS} collects them, and the tests hold that list, the routes and {@code
 * /v1/openapi.json} to one another, so none of the three can drift.
 */
public record Operation(String method, String path) {
  public static Operation get(String path) {
    return new Operation("GET", path);
  }

  public static Operation post(String path) {
    return new Operation("POST", path);
  }

  public static Operation put(String path) {
    return new Operation("PUT", path);
  }

  public static Operation delete(String path) {
    return new Operation("DELETE", path);
  }

  @SafeVarargs
  static List<Operation> all(List<Operation>... lists) {
    return Stream.of(lists).flatMap(List::stream).toList();
  }

  @Override
  public String toString() {
    return method + " " + path;
  }
}
