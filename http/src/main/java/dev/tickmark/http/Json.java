package dev.tickmark.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.io.JsonStringEncoder;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.cfg.CoercionAction;
import com.fasterxml.jackson.databind.cfg.CoercionInputShape;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.type.LogicalType;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;
import com.fasterxml.jackson.module.paramnames.ParameterNamesModule;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.pekko.http.javadsl.marshallers.jackson.Jackson;
import org.apache.pekko.http.javadsl.marshalling.Marshaller;
import org.apache.pekko.http.javadsl.model.RequestEntity;
import org.apache.pekko.util.ByteString;

/**
 * The wire's JSON: snake_case, strict. Unknown fields, JSON numbers where text is expected,
 * trailing tokens and malformed documents are refused with a precise problem code instead of being
 * guessed at.
 */
public final class Json {
  /** Request fields that carry money; a wrong type there is {@code invalid_amount}. */
  static final Set<String> AMOUNT_FIELDS =
      Set.of(
          "amount",
          "monthly",
          "minimum",
          "max_total",
          "max_price_per_gpu_hour",
          "on_demand_price_per_gpu_hour",
          "spot_price_per_gpu_hour");

  public static final ObjectMapper MAPPER = mapper();

  private Json() {}

  private static ObjectMapper mapper() {
    ObjectMapper m =
        new ObjectMapper()
            .registerModule(new ParameterNamesModule())
            .registerModule(new JavaTimeModule())
            .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
            .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS);
    // {"amount":"1","amount":"1000"} is ambiguous: refuse it rather than let the last key win.
    m.enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION);
    // "amount": 12 must not quietly become "12": money is text on the wire.
    m.coercionConfigFor(LogicalType.Textual)
        .setCoercion(CoercionInputShape.Integer, CoercionAction.Fail)
        .setCoercion(CoercionInputShape.Float, CoercionAction.Fail)
        .setCoercion(CoercionInputShape.Boolean, CoercionAction.Fail);
    return m;
  }

  public static <T> Marshaller<T, RequestEntity> marshaller() {
    return Jackson.marshaller(MAPPER);
  }

  /**
   * Reads a request body into {@code type}, or throws the {@link Problem} that says what is wrong
   * with it.
   */
  public static <T> T read(ByteString body, Class<T> type) {
    if (body.isEmpty()) throw Problem.badRequest("malformed_json", "the request needs a JSON body");
    refuseNul(body);
    try {
      T value = MAPPER.readValue(body.toArray(), type);
      if (value == null)
        throw Problem.badRequest("malformed_json", "the request body must be a JSON object");
      return value;
    } catch (UnrecognizedPropertyException e) {
      throw Problem.badRequest("unknown_field", "unknown field \"" + e.getPropertyName() + "\"");
    } catch (MismatchedInputException e) {
      String field =
          e.getPath().stream()
              .map(r -> r.getFieldName() == null ? "[" + r.getIndex() + "]" : r.getFieldName())
              .collect(Collectors.joining("."));
      if (AMOUNT_FIELDS.contains(field)) {
        throw Problem.badRequest(
            "invalid_amount",
            "\"" + field + "\" must be a string of euros with up to 6 decimals, like \"12.50\"");
      }
      if (field.isEmpty())
        throw Problem.badRequest("malformed_json", "the request body must be a JSON object");
      throw Problem.badRequest("invalid_field", "\"" + field + "\" has the wrong type");
    } catch (JsonProcessingException e) {
      throw Problem.badRequest("malformed_json", "the request body is not valid JSON");
    } catch (java.io.IOException e) {
      throw Problem.badRequest("malformed_json", "the request body could not be read");
    }
  }

  public static JsonNode tree(ByteString body) {
    refuseNul(body);
    try {
      JsonNode node = MAPPER.readTree(body.toArray());
      if (node == null || !node.isObject())
        throw Problem.badRequest("malformed_json", "the request body must be a JSON object");
      return node;
    } catch (java.io.IOException e) {
      throw Problem.badRequest("malformed_json", "the request body is not valid JSON");
    }
  }

  /**
   * Refuses a body whose JSON text holds U+0000 (the escape {@code \\u0000}; a raw NUL is no JSON
   * at all): PostgreSQL cannot store it in text, so a name or label with one answered 503 {@code
   * database_unavailable} where it reached a table. {@code \\\\u0000}, an escaped backslash and the
   * letters, is text like any other.
   */
  static void refuseNul(ByteString body) {
    for (int i = 0; i < body.length() - 1; i++) {
      if (body.apply(i) != '\\') continue;
      if (body.apply(i + 1) == 'u'
          && i + 5 < body.length()
          && body.apply(i + 2) == '0'
          && body.apply(i + 3) == '0'
          && body.apply(i + 4) == '0'
          && body.apply(i + 5) == '0')
        throw Problem.badRequest(
            "invalid_field", "text may not contain the NUL character (U+0000)");
      i++; // the escaped character: never the start of another escape
    }
  }

  public static String write(Object value) {
    try {
      return MAPPER.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(
          "cannot write JSON for " + value.getClass().getSimpleName(), e);
    }
  }

  static String quote(String text) {
    if (text == null) return "null";
    return "\"" + new String(JsonStringEncoder.getInstance().quoteAsString(text)) + "\"";
  }
}
