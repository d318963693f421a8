package dev.tickmark.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.dataformat.cbor.databind.CBORMapper;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;
import com.fasterxml.jackson.module.paramnames.ParameterNamesModule;
import com.typesafe.config.ConfigFactory;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.serialization.jackson.JacksonObjectMapperProvider;
import org.junit.jupiter.api.Test;

/**
 * {@link IsoInstants} writes exactly what {@link Instant#toString()} and Jackson's {@code
 * JavaTimeModule} write, reads back what they wrote, and leaves every other form to Jackson's own
 * reader; the node's serialization config puts it in use.
 */
class IsoInstantsTest {
  /** Instants across the plain years, with no fraction and with fractions of 3, 6 and 9 digits. */
  private static List<Instant> samples() {
    long min = Instant.parse("0000-01-01T00:00:00Z").getEpochSecond();
    long max = Instant.parse("9999-12-31T23:59:59Z").getEpochSecond();
    Random random = new Random(20261207);
    List<Instant> instants =
        new ArrayList<>(
            List.of(
                Instant.EPOCH,
                Instant.ofEpochSecond(min),
                Instant.ofEpochSecond(max, 999_999_999),
                Instant.parse("2024-02-29T23:59:59.999Z"),
                Instant.parse("2000-02-29T00:00:00.000001Z"),
                Instant.parse("1900-03-01T00:00:00Z"),
                Instant.parse("1969-12-31T23:59:59.5Z"),
                Instant.parse("2026-12-07T21:37:03.123456Z")));
    for (int i = 0; i < 20_000; i++) {
      long second = min + (long) (random.nextDouble() * (max - min));
      int nanos =
          switch (i % 4) {
            case 0 -> 0;
            case 1 -> random.nextInt(1_000) * 1_000_000;
            case 2 -> random.nextInt(1_000_000) * 1_000;
            default -> random.nextInt(1_000_000_000);
          };
      instants.add(Instant.ofEpochSecond(second, nanos));
    }
    // Around now, where nearly every instant of the market is.
    long now = Instant.parse("2026-12-07T00:00:00Z").getEpochSecond();
    for (int i = 0; i < 5_000; i++)
      instants.add(
          Instant.ofEpochSecond(
              now + random.nextInt(400 * 86_400), random.nextInt(1_000_000) * 1_000));
    return instants;
  }

  @Test
  void writesWhatInstantToStringWrites() {
    char[] out = new char[IsoInstants.MAX_LENGTH];
    for (Instant instant : samples()) {
      int length = IsoInstants.format(instant, out);
      assertEquals(instant.toString(), new String(out, 0, length));
    }
  }

  @Test
  void leavesYearsOutsideFourDigitsToInstantToString() {
    char[] out = new char[IsoInstants.MAX_LENGTH];
    assertEquals(-1, IsoInstants.format(Instant.parse("+10000-01-01T00:00:00Z"), out));
    assertEquals(-1, IsoInstants.format(Instant.parse("-0001-12-31T23:59:59Z"), out));
    assertEquals(-1, IsoInstants.format(Instant.MAX, out));
    assertEquals(-1, IsoInstants.format(Instant.MIN, out));
  }

  @Test
  void readsWhatInstantToStringWrites() {
    for (Instant instant : samples()) {
      char[] text = ("[" + instant + "]").toCharArray(); // at an offset, as in a parser's buffer
      assertEquals(instant, IsoInstants.parse(text, 1, text.length - 2));
    }
  }

  @Test
  void readsFractionsOfAnyLengthAsInstantParseDoes() {
    for (String fraction :
        List.of("1", "12", "1234", "12345", "1234567", "12345678", "000000001")) {
      String text = "2026-12-07T21:37:03." + fraction + "Z";
      assertEquals(Instant.parse(text), IsoInstants.parse(text.toCharArray(), 0, text.length()));
    }
  }

  @Test
  void refusesEveryOtherFormSoThatJacksonsReaderDecides() {
    for (String text :
        List.of(
            "2026-02-29T00:00:00Z", // not a leap year
            "2026-04-31T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-12-07T24:00:00Z",
            "2026-12-07T23:60:00Z",
            "2026-12-07T23:59:60Z", // a leap second: Jackson's reader knows what to do
            "2026-12-07T21:37:03.Z",
            "2026-12-07T21:37:03.1234567890Z",
            "2026-12-07T21:37:03",
            "2026-12-07T21:37:03z",
            "2026-12-07T21:37:03+01:00",
            "2026-12-07 21:37:03Z",
            "2026-12-07T21:37:0xZ",
            "+10000-01-01T00:00:00Z",
            "")) {
      assertNull(IsoInstants.parse(text.toCharArray(), 0, text.length()), text);
    }
  }

  public record Stamped(Instant at, Instant endAt, Map<String, Instant> seen, Instant never) {}

  private static ObjectMapper jacksonsOwn() {
    return CBORMapper.builder()
        .addModule(new ParameterNamesModule())
        .addModule(new JavaTimeModule())
        .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
        .build();
  }

  private static ObjectMapper withIsoInstants() {
    return CBORMapper.builder()
        .addModule(new ParameterNamesModule())
        .addModule(new JavaTimeModule())
        .addModule(new IsoInstants())
        .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
        .build();
  }

  @Test
  void theBytesAreTheSameAsJacksonsOwnBothWays() throws Exception {
    ObjectMapper before = jacksonsOwn();
    ObjectMapper after = withIsoInstants();
    List<Instant> instants = samples();
    for (int i = 0; i + 2 < instants.size(); i += 3) {
      Stamped stamped =
          new Stamped(
              instants.get(i), instants.get(i + 1), Map.of("host-" + i, instants.get(i + 2)), null);
      byte[] written = after.writeValueAsBytes(stamped);
      assertArrayEquals(before.writeValueAsBytes(stamped), written);
      assertEquals(stamped, before.readValue(written, Stamped.class));
      assertEquals(stamped, after.readValue(before.writeValueAsBytes(stamped), Stamped.class));
    }
  }

  @Test
  void otherFormsReadAsJacksonsOwnReaderReadsThem() throws Exception {
    ObjectMapper before = jacksonsOwn();
    ObjectMapper after = withIsoInstants();
    ObjectMapper asText = CBORMapper.builder().build();
    for (String text :
        List.of("+10000-01-01T00:00:00Z", "-0001-12-31T23:59:59Z", "2026-12-07T22:37:03.5+01:00")) {
      byte[] bytes = asText.writeValueAsBytes(Map.of("at", text, "endAt", text));
      assertEquals(
          before.readValue(bytes, Stamped.class).at(), after.readValue(bytes, Stamped.class).at());
    }
    // Written as a number (WRITE_DATES_AS_TIMESTAMPS on): read as Jackson reads it.
    byte[] numeric = asText.writeValueAsBytes(Map.of("at", 1_765_143_423.25));
    assertEquals(
        Instant.ofEpochSecond(1_765_143_423L, 250_000_000),
        after.readValue(numeric, Stamped.class).at());
    // Not an instant at all: the same refusal as before.
    byte[] wrong = asText.writeValueAsBytes(Map.of("at", "2026-02-29T00:00:00Z"));
    Exception refused =
        org.junit.jupiter.api.Assertions.assertThrows(
            Exception.class, () -> after.readValue(wrong, Stamped.class));
    assertInstanceOf(DateTimeParseException.class, refused.getCause());
  }

  @Test
  void theEnginesSerializationUsesIt() throws Exception {
    ActorTestKit testKit = ActorTestKit.create("IsoInstantsTest", ConfigFactory.load());
    try {
      ObjectMapper mapper =
          JacksonObjectMapperProvider.get(testKit.system())
              .getOrCreate("jackson-cbor", Optional.empty());
      assertTrue(mapper.getRegisteredModuleIds().contains("tickmark-iso-instants"));
      assertInstanceOf(
          IsoInstants.Writer.class,
          mapper.getSerializerProviderInstance().findValueSerializer(Instant.class));
    } finally {
      testKit.shutdownTestKit();
    }
  }
}
