package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class ParamsTest {
  @Test
  void textWithANulOrAnotherControlCharacterIsAnInvalidParameter() {
    for (String hostile : new String[] {"\u0000", "bob\u0000", "a\nb", "\u007f"}) {
      Problem p = assertThrows(Problem.class, () -> Params.text("operator", hostile, 64));
      assertEquals(400, p.status());
      assertEquals("invalid_parameter", p.code());
    }
  }

  @Test
  void textOverItsLengthIsAnInvalidParameterAndOrdinaryTextPasses() {
    Problem p = assertThrows(Problem.class, () -> Params.text("operator", "x".repeat(65), 64));
    assertEquals("invalid_parameter", p.code());
    assertEquals("bob-ö", Params.text("operator", "bob-ö", 64));
    assertEquals("x".repeat(64), Params.text("operator", "x".repeat(64), 64));
  }
}
