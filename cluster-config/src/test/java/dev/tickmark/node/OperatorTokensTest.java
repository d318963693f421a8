package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code TICKMARK_OPERATOR_TOKENS}: named operator tokens beside (or instead of) the shared one,
 * each as strong as it, and errors that name the operator but never print a token.
 */
class OperatorTokensTest {
  static final String SHARED = "tmkop_shared_0123456789abcdef0123456789abcdef";
  static final String ALICE = "tmkop_alice_0123456789abcdef0123456789abcdef";
  static final String BOB = "tmkop_bob_0123456789abcdef0123456789abcdef01";

  @Test
  void namedTokensJoinTheSharedOneUnderTheirNames() {
    NodeSettings s =
        NodeSettings.fromEnvironment(
            Map.of(
                "TICKMARK_OPERATOR_TOKEN",
                SHARED,
                "TICKMARK_OPERATOR_TOKENS",
                " alice:" + ALICE + " , bob:" + BOB + ","));
    assertEquals(Map.of("operator", SHARED, "alice", ALICE, "bob", BOB), s.operatorTokens());
    assertFalse(s.toString().contains(ALICE), s.toString());
  }

  @Test
  void withOnlyNamedTokensNoSharedTokenIsGenerated() {
    NodeSettings s =
        NodeSettings.fromEnvironment(Map.of("TICKMARK_OPERATOR_TOKENS", "alice:" + ALICE));
    assertNull(s.operatorToken());
    assertFalse(s.operatorTokenGenerated());
    assertEquals(Map.of("alice", ALICE), s.operatorTokens());
    // neither set: one is generated, as before, and named "operator"
    NodeSettings generated = NodeSettings.fromEnvironment(Map.of());
    assertTrue(generated.operatorTokenGenerated());
    assertEquals(Map.of("operator", generated.operatorToken()), generated.operatorTokens());
  }

  @Test
  void refusesWeakDuplicatedOrBadlyNamedTokensWithoutPrintingThem() {
    for (String value :
        new String[] {
          "alice:short",
          "alice:tmkop_change-me_0123456789abcdef0123456789",
          "Alice:" + ALICE,
          ":" + ALICE,
          ALICE,
          "alice:" + ALICE + ",alice:" + BOB,
          "alice:" + ALICE + ",bob:" + ALICE,
          "operator:" + ALICE
        }) {
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  NodeSettings.fromEnvironment(
                      Map.of("TICKMARK_OPERATOR_TOKEN", SHARED, "TICKMARK_OPERATOR_TOKENS", value)),
              value);
      assertTrue(e.getMessage().contains("TICKMARK_OPERATOR_TOKEN"), e.getMessage());
      for (String secret : new String[] {ALICE, BOB, "short", SHARED})
        assertFalse(e.getMessage().contains(secret), e.getMessage());
    }
  }
}
