package dev.tickmark.http;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.payout.PayoutRun;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.text.Normalizer;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import javax.xml.stream.XMLOutputFactory;
import javax.xml.stream.XMLStreamException;
import javax.xml.stream.XMLStreamWriter;

/**
 * A completed payout run as files for the bank: a CSV for people and spreadsheets, and an ISO 20022
 * {@code pain.001.001.03} SEPA credit transfer initiation for the bank's upload. Both hold only the
 * payouts the accounts confirmed, and both are pure functions of the run, so exporting a run again
 * gives the same bytes.
 *
 * <p>Bank references must be at most 35 characters of the SEPA character set, which our ids (with
 * {@code _} and up to 56 characters) are not; each one is therefore derived from our id: the
 * message id from the run id and each transaction's {@code EndToEndId} from its payout id, as
 * {@code TM} and 32 hex digits of their SHA-256. The CSV lists both, so a bank statement line leads
 * back to its payout.
 */
final class PayoutExports {
  static final String PAIN_001_001_03 = "urn:iso:std:iso:20022:tech:xsd:pain.001.001.03";

  /**
   * Whether the operator named the account the transfers are paid from ({@code
   * tickmark.payouts.debtor}).
   */
  static boolean configured(ApiSettings.PayoutDebtor debtor) {
    return debtor != null
        && debtor.name() != null
        && !debtor.name().isBlank()
        && debtor.iban() != null
        && !debtor.iban().isBlank();
  }

  private static final DateTimeFormatter DATE_TIME =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss").withZone(ZoneOffset.UTC);
  private static final DateTimeFormatter DATE =
      DateTimeFormatter.ISO_LOCAL_DATE.withZone(ZoneOffset.UTC);
  private static final String CSV_HEADER =
      "run_id,payout_id,end_to_end_id,account_id,holder_name,iban,bic,amount,amount_eur,currency\r\n";

  private PayoutExports() {}

  /**
   * The transfers the run sent: paid ones, and those the bank returned later (they were sent, so a
   * run exported again still gives the same bytes).
   */
  static List<PayoutRun.PaymentView> paid(PayoutRun.RunView run) {
    return run.payouts().stream()
        .filter(p -> p.status().equals("paid") || p.status().equals("returned"))
        .toList();
  }

  /**
   * RFC 4180 CSV, CRLF line ends, UTF-8; amounts with 6 decimals and, for the bank, in euros with
   * 2.
   */
  static String csv(PayoutRun.RunView run) {
    StringBuilder out = new StringBuilder(CSV_HEADER);
    for (PayoutRun.PaymentView p : paid(run)) {
      Account.PayoutDetails payee = p.payee();
      out.append(
              String.join(
                  ",",
                  cell(run.id()),
                  cell(p.payoutId()),
                  cell(reference(p.payoutId())),
                  cell(p.accountId()),
                  cell(payee.holderName()),
                  cell(payee.iban()),
                  cell(payee.bic() == null ? "" : payee.bic()),
                  Money.format(p.amount()),
                  euros(p.amount()),
                  "EUR"))
          .append("\r\n");
    }
    return out.toString();
  }

  /**
   * The SEPA credit transfer file: one group header, one payment information block, one transaction
   * per payout.
   */
  static String pain001(PayoutRun.RunView run, ApiSettings.PayoutDebtor debtor) {
    List<PayoutRun.PaymentView> paid = paid(run);
    long total = paid.stream().mapToLong(PayoutRun.PaymentView::amount).sum();
    String count = Integer.toString(paid.size());
    String messageId = reference(run.id());
    try {
      StringWriter buffer = new StringWriter();
      XMLStreamWriter x = XMLOutputFactory.newInstance().createXMLStreamWriter(buffer);
      x.writeStartDocument("UTF-8", "1.0");
      x.writeCharacters("\n");
      x.writeStartElement("Document");
      x.writeDefaultNamespace(PAIN_001_001_03);
      x.writeStartElement("CstmrCdtTrfInitn");

      x.writeStartElement("GrpHdr");
      text(x, "MsgId", messageId);
      text(x, "CreDtTm", DATE_TIME.format(run.createdAt().truncatedTo(ChronoUnit.SECONDS)));
      text(x, "NbOfTxs", count);
      text(x, "CtrlSum", euros(total));
      x.writeStartElement("InitgPty");
      text(x, "Nm", sepaText(debtor.name(), 70));
      x.writeEndElement();
      x.writeEndElement();

      x.writeStartElement("PmtInf");
      text(x, "PmtInfId", messageId);
      text(x, "PmtMtd", "TRF");
      text(x, "BtchBookg", "true");
      text(x, "NbOfTxs", count);
      text(x, "CtrlSum", euros(total));
      x.writeStartElement("PmtTpInf");
      x.writeStartElement("SvcLvl");
      text(x, "Cd", "SEPA");
      x.writeEndElement();
      x.writeEndElement();
      text(x, "ReqdExctnDt", DATE.format(run.completedAt()));
      party(x, "Dbtr", debtor.name());
      account(x, "DbtrAcct", debtor.iban());
      agent(x, "DbtrAgt", debtor.bic(), true);
      text(x, "ChrgBr", "SLEV");
      String remittance = "Tickmark earnings payout " + DATE.format(run.createdAt());
      for (PayoutRun.PaymentView p : paid) {
        x.writeStartElement("CdtTrfTxInf");
        x.writeStartElement("PmtId");
        text(x, "EndToEndId", reference(p.payoutId()));
        x.writeEndElement();
        x.writeStartElement("Amt");
        x.writeStartElement("InstdAmt");
        x.writeAttribute("Ccy", "EUR");
        x.writeCharacters(euros(p.amount()));
        x.writeEndElement();
        x.writeEndElement();
        if (p.payee().bic() != null) agent(x, "CdtrAgt", p.payee().bic(), false);
        party(x, "Cdtr", p.payee().holderName());
        account(x, "CdtrAcct", p.payee().iban());
        x.writeStartElement("RmtInf");
        text(x, "Ustrd", remittance);
        x.writeEndElement();
        x.writeEndElement();
      }
      x.writeEndElement(); // PmtInf
      x.writeEndElement(); // CstmrCdtTrfInitn
      x.writeEndElement(); // Document
      x.writeEndDocument();
      x.close();
      return buffer.append('\n').toString();
    } catch (XMLStreamException e) {
      throw new IllegalStateException("cannot write pain.001 for run " + run.id(), e);
    }
  }

  /**
   * A bank reference for one of our ids: {@code TM} and 32 hex digits of its SHA-256 (34
   * characters, SEPA-safe).
   */
  static String reference(String id) {
    try {
      byte[] digest =
          MessageDigest.getInstance("SHA-256").digest(id.getBytes(StandardCharsets.UTF_8));
      return "TM" + HexFormat.of().withUpperCase().formatHex(digest, 0, 16);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Whole cents of {@code micros} as euros with two decimals; runs only pay whole cents. */
  static String euros(long micros) {
    long cents = micros / PayoutRun.CENT;
    return String.format(Locale.ROOT, "%d.%02d", cents / 100, cents % 100);
  }

  /**
   * Text in the EPC's basic Latin character set ({@code a-z A-Z 0-9 / - ? : ( ) . , ' +} and
   * space), which every SEPA bank accepts: accents are dropped ({@code Müller} → {@code Muller}), a
   * few letters spelled out, anything else becomes a space; at most {@code max} characters.
   */
  static String sepaText(String text, int max) {
    String spelled =
        text.replace("ß", "ss")
            .replace("Æ", "AE")
            .replace("æ", "ae")
            .replace("Œ", "OE")
            .replace("œ", "oe")
            .replace("Ø", "O")
            .replace("ø", "o")
            .replace("Ł", "L")
            .replace("ł", "l")
            .replace("Đ", "D")
            .replace("đ", "d")
            .replace("&", "+");
    String stripped = Normalizer.normalize(spelled, Normalizer.Form.NFD).replaceAll("\\p{M}", "");
    StringBuilder out = new StringBuilder(stripped.length());
    for (char c : stripped.toCharArray()) {
      boolean allowed =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || "/-?:().,'+ ".indexOf(c) >= 0;
      out.append(allowed ? c : ' ');
    }
    String collapsed = out.toString().replaceAll(" +", " ").strip();
    if (collapsed.isEmpty()) collapsed = "NOTPROVIDED";
    return collapsed.length() <= max ? collapsed : collapsed.substring(0, max).strip();
  }

  private static void text(XMLStreamWriter x, String element, String value)
      throws XMLStreamException {
    x.writeStartElement(element);
    x.writeCharacters(value);
    x.writeEndElement();
  }

  private static void party(XMLStreamWriter x, String element, String name)
      throws XMLStreamException {
    x.writeStartElement(element);
    text(x, "Nm", sepaText(name, 70));
    x.writeEndElement();
  }

  private static void account(XMLStreamWriter x, String element, String iban)
      throws XMLStreamException {
    x.writeStartElement(element);
    x.writeStartElement("Id");
    text(x, "IBAN", iban);
    x.writeEndElement();
    x.writeEndElement();
  }

  /** A bank by BIC; without one, the debtor's bank is {@code NOTPROVIDED} (IBAN-only SEPA). */
  private static void agent(XMLStreamWriter x, String element, String bic, boolean required)
      throws XMLStreamException {
    if (bic == null && !required) return;
    x.writeStartElement(element);
    x.writeStartElement("FinInstnId");
    if (bic != null) {
      text(x, "BIC", bic);
    } else {
      x.writeStartElement("Othr");
      text(x, "Id", "NOTPROVIDED");
      x.writeEndElement();
    }
    x.writeEndElement();
    x.writeEndElement();
  }

  /**
   * One CSV field: quoted when it holds a separator, a quote or a line end; a leading formula sign
   * is defused.
   */
  static String cell(String value) {
    String v = value;
    if (!v.isEmpty() && "=+-@\t\r".indexOf(v.charAt(0)) >= 0) v = "'" + v;
    if (v.contains(",") || v.contains("\"") || v.contains("\n") || v.contains("\r"))
      v = "\"" + v.replace("\"", "\"\"") + "\"";
    return v;
  }
}
