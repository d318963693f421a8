package dev.tickmark.engine;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.deser.std.StdScalarDeserializer;
import com.fasterxml.jackson.databind.module.SimpleModule;
import com.fasterxml.jackson.databind.ser.std.StdScalarSerializer;
import com.fasterxml.jackson.datatype.jsr310.deser.InstantDeserializer;
import java.io.IOException;
import java.time.Instant;

/**
 * The instants in every event, snapshot and message, in the same ISO-8601 text as before ({@link
 * Instant#toString()}: {@code 2026-12-07T21:37:03.123456Z}), written and read without {@code
 * java.time}'s formatter, which builds a parse context, a map of fields and several strings for
 * each one. Projections read every event back, so this was about 8 % of what a node allocates per
 * launch (docs/benchmarks.md, "Instants read and written by hand"). The bytes are unchanged: text
 * written by either side reads the same on the other, so nodes of both versions can share a
 * journal. Anything outside the plain form (years outside 0000–9999, offsets, leap seconds) goes
 * through Jackson's own {@code JavaTimeModule} code, as before.
 *
 * <p>Registered as a Jackson module after {@code JavaTimeModule} in {@code serialization.conf}, so
 * its (de)serializer is the one Jackson picks for {@link Instant}.
 */
public final class IsoInstants extends SimpleModule {
  /** Longest plain form: {@code yyyy-MM-ddTHH:mm:ss.nnnnnnnnnZ}. */
  static final int MAX_LENGTH = 30;

  public IsoInstants() {
    super("tickmark-iso-instants");
    addSerializer(Instant.class, new Writer());
    addDeserializer(Instant.class, new Reader());
  }

  /**
   * Writes {@code instant} as {@link Instant#toString()} would into {@code out} (at least {@value
   * #MAX_LENGTH} chars) and returns the length, or -1 for a year outside 0000–9999.
   */
  static int format(Instant instant, char[] out) {
    long seconds = instant.getEpochSecond();
    long epochDay = Math.floorDiv(seconds, 86_400);
    int secondOfDay = (int) Math.floorMod(seconds, 86_400);
    // Civil date from days since 1970-01-01, in 400-year eras starting on March 1st (H. Hinnant).
    long z = epochDay + 719_468;
    long era = Math.floorDiv(z, 146_097);
    long dayOfEra = z - era * 146_097;
    long yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365;
    long dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100);
    long mp = (5 * dayOfYear + 2) / 153;
    int day = (int) (dayOfYear - (153 * mp + 2) / 5 + 1);
    int month = (int) (mp < 10 ? mp + 3 : mp - 9);
    long year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
    if (year < 0 || year > 9_999) return -1;
    int i = digits(out, 0, (int) year, 4);
    out[i++] = '-';
    i = digits(out, i, month, 2);
    out[i++] = '-';
    i = digits(out, i, day, 2);
    out[i++] = 'T';
    i = digits(out, i, secondOfDay / 3_600, 2);
    out[i++] = ':';
    i = digits(out, i, secondOfDay / 60 % 60, 2);
    out[i++] = ':';
    i = digits(out, i, secondOfDay % 60, 2);
    int nanos = instant.getNano();
    if (nanos != 0) {
      // As ISO_INSTANT: the fraction in groups of three digits, as many as it needs.
      out[i++] = '.';
      if (nanos % 1_000_000 == 0) i = digits(out, i, nanos / 1_000_000, 3);
      else if (nanos % 1_000 == 0) i = digits(out, i, nanos / 1_000, 6);
      else i = digits(out, i, nanos, 9);
    }
    out[i++] = 'Z';
    return i;
  }

  private static int digits(char[] out, int at, int value, int width) {
    for (int i = at + width - 1; i >= at; i--) {
      out[i] = (char) ('0' + value % 10);
      value /= 10;
    }
    return at + width;
  }

  /**
   * The instant {@code text[offset, offset + length)} names in the plain form {@link #format}
   * writes (with a fraction of 1 to 9 digits), or null for anything else.
   */
  static Instant parse(char[] text, int offset, int length) {
    if (length < 20 || length > MAX_LENGTH) return null;
    int end = offset + length;
    if (text[offset + 4] != '-'
        || text[offset + 7] != '-'
        || text[offset + 10] != 'T'
        || text[offset + 13] != ':'
        || text[offset + 16] != ':'
        || text[end - 1] != 'Z') return null;
    int year = number(text, offset, 4);
    int month = number(text, offset + 5, 2);
    int day = number(text, offset + 8, 2);
    int hour = number(text, offset + 11, 2);
    int minute = number(text, offset + 14, 2);
    int second = number(text, offset + 17, 2);
    if (year < 0 || month < 1 || month > 12 || day < 1 || day > lengthOfMonth(year, month))
      return null;
    if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59)
      return null;
    int nanos = 0;
    int fraction = length - 20; // chars between the seconds and the 'Z', the '.' included
    if (fraction > 0) {
      if (fraction < 2 || text[offset + 19] != '.') return null;
      int digits = fraction - 1;
      int value = number(text, offset + 20, digits);
      if (value < 0) return null;
      nanos = value;
      for (int k = digits; k < 9; k++) nanos *= 10;
    }
    long epochDay = epochDay(year, month, day);
    return Instant.ofEpochSecond(epochDay * 86_400 + hour * 3_600L + minute * 60L + second, nanos);
  }

  /** The decimal number of {@code width} digits at {@code at}, or -1 if any is not a digit. */
  private static int number(char[] text, int at, int width) {
    int value = 0;
    for (int i = at; i < at + width; i++) {
      char c = text[i];
      if (c < '0' || c > '9') return -1;
      value = value * 10 + (c - '0');
    }
    return value;
  }

  private static int lengthOfMonth(int year, int month) {
    return switch (month) {
      case 2 -> (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28;
      case 4, 6, 9, 11 -> 30;
      default -> 31;
    };
  }

  /** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
  private static long epochDay(int year, int month, int day) {
    long y = month <= 2 ? year - 1 : year;
    long era = Math.floorDiv(y, 400);
    long yearOfEra = y - era * 400;
    long dayOfYear = (153L * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    long dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear;
    return era * 146_097 + dayOfEra - 719_468;
  }

  static final class Writer extends StdScalarSerializer<Instant> {
    Writer() {
      super(Instant.class);
    }

    @Override
    public void serialize(Instant value, JsonGenerator gen, SerializerProvider provider)
        throws IOException {
      char[] text = new char[MAX_LENGTH];
      int length = format(value, text);
      if (length < 0) gen.writeString(value.toString());
      else gen.writeString(text, 0, length);
    }
  }

  static final class Reader extends StdScalarDeserializer<Instant> {
    Reader() {
      super(Instant.class);
    }

    @Override
    public Instant deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
      if (p.hasToken(JsonToken.VALUE_STRING)) {
        Instant plain = parse(p.getTextCharacters(), p.getTextOffset(), p.getTextLength());
        if (plain != null) return plain;
      }
      return InstantDeserializer.INSTANT.deserialize(p, ctxt);
    }
  }
}
