package dev.tickmark.agent.snapshot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.net.URI;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class EngineHttpTest {
  @Test
  void theHttpAddressOfAnEngineIsItsWebsocketAddressWithTheHttpScheme() {
    assertEquals(
        URI.create("http://127.0.0.1:8080"),
        EngineHttp.httpBase(URI.create("ws://127.0.0.1:8080")));
    assertEquals(
        URI.create("https://engine.example:443/base"),
        EngineHttp.httpBase(URI.create("wss://engine.example:443/base/")));
    assertThrows(IllegalArgumentException.class, () -> EngineHttp.httpBase(URI.create("ftp://x")));
  }

  @Test
  void retryDelaysGrowToTheirMaximum() {
    EngineHttp.Retry r = new EngineHttp.Retry(8, Duration.ofMillis(500), Duration.ofSeconds(30));
    assertEquals(Duration.ofMillis(500), r.delay(0));
    assertEquals(Duration.ofSeconds(1), r.delay(1));
    assertEquals(Duration.ofSeconds(16), r.delay(5));
    assertEquals(Duration.ofSeconds(30), r.delay(6));
    assertEquals(Duration.ofSeconds(30), r.delay(60));
  }
}
