package dev.tickmark.engine.account;

import java.util.Map;
import java.util.regex.Pattern;

/**
 * The reasons a bank gives for returning a SEPA credit transfer: ISO 20022 {@code
 * ExternalReturnReason1Code}s, four letters or digits, as a bank statement (camt.053/054) or a
 * return notice (pacs.004) carries them. Any well-formed code is accepted (banks use more than the
 * EPC list); the common ones are named.
 */
public final class PayoutReturns {
  private PayoutReturns() {}

  private static final Pattern CODE = Pattern.compile("[A-Z0-9]{4}");

  public static final String REASON_CODE_RULE =
      "a return reason is the bank's ISO 20022 code: four capital letters or digits, like AC04";

  /**
   * The EPC SEPA credit transfer rulebook's return reasons, in the words a provider understands.
   */
  private static final Map<String, String> MEANINGS =
      Map.ofEntries(
          Map.entry("AC01", "account number incorrect"),
          Map.entry("AC04", "account closed"),
          Map.entry("AC06", "account blocked"),
          Map.entry("AG01", "transaction forbidden on this account"),
          Map.entry("AG02", "invalid bank operation code"),
          Map.entry("AM05", "duplicate payment"),
          Map.entry("BE04", "creditor address missing"),
          Map.entry("CNOR", "creditor bank not registered"),
          Map.entry("DNOR", "debtor bank not registered"),
          Map.entry("FF01", "invalid file format"),
          Map.entry("FOCR", "returned after a cancellation request"),
          Map.entry("MD07", "account holder deceased"),
          Map.entry("MS02", "refused by the account holder"),
          Map.entry("MS03", "reason not specified by the bank"),
          Map.entry("RC01", "bank identifier (BIC) incorrect"),
          Map.entry("RR01", "account or identification of the payee missing"),
          Map.entry("RR02", "payee name or address missing"),
          Map.entry("RR03", "payee name or address missing"),
          Map.entry("RR04", "regulatory reason"));

  public static boolean isReasonCode(String code) {
    return code != null && CODE.matcher(code).matches();
  }

  /** What {@code code} means, or null for a code the rulebook does not list. */
  public static String meaning(String code) {
    return code == null ? null : MEANINGS.get(code);
  }
}
