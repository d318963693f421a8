package dev.tickmark.engine.account;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class IbanTest {
  @Test
  void acceptsRegistryExamplesOfSepaCountriesWithOrWithoutSpaces() {
    // Examples from the SWIFT IBAN registry.
    for (String iban :
        new String[] {
          "DE89370400440532013000",
          "NL91ABNA0417164300",
          "FR1420041010050500013M02606",
          "BE68539007547034",
          "GB29NWBK60161331926819",
          "CH9300762011623852957",
          "NO9386011117947",
          "MT84MALT011000012345MTLCAST001S",
          "de89 3704 0044 0532 0130 00"
        }) {
      assertTrue(Iban.isValid(iban), iban + ": " + Iban.problem(iban));
    }
    assertEquals("DE89370400440532013000", Iban.normalize("de89 3704 0044 0532 0130 00"));
  }

  @Test
  void refusesAWrongChecksumALengthForeignToTheCountryAndNonSepaCountries() {
    assertTrue(Iban.problem("DE89370400440532013001").orElseThrow().contains("check digits"));
    assertTrue(Iban.problem("DE8937040044053201300").orElseThrow().contains("22 characters"));
    assertTrue(Iban.problem("US12345678901234567890").orElseThrow().contains("not a SEPA country"));
    assertTrue(
        Iban.problem("BR1800360305000010009795493C1").orElseThrow().contains("not a SEPA country"));
    assertFalse(Iban.isValid("DE89-3704-0044-0532-0130-00"));
    assertFalse(Iban.isValid("DEAB370400440532013000"));
    assertFalse(Iban.isValid(""));
    assertFalse(Iban.isValid(null));
  }

  @Test
  void masksAllButTheLastFourCharacters() {
    assertEquals("******************3000", Iban.masked("DE89370400440532013000"));
  }

  @Test
  void checksBicShape() {
    assertTrue(Iban.isValidBic("DEUTDEFF"));
    assertTrue(Iban.isValidBic("DEUTDEFF500"));
    assertTrue(Iban.isValidBic("ABNANL2A"));
    assertFalse(Iban.isValidBic("DEUTDEF"));
    assertFalse(Iban.isValidBic("1EUTDEFF"));
    assertFalse(Iban.isValidBic("deutdeff"));
  }
}
