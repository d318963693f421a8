package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.account.Iban;
import dev.tickmark.engine.payout.PayoutRun;
import java.io.ByteArrayInputStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

/**
 * The pain.001.001.03 export, checked structurally: no artifact on Maven Central that we could find
 * ships the official XSD (pw-iso20022 ships JAXB classes only), so this test asserts what the
 * schema and the EPC SEPA rulebook require of what we write: the elements, their order, the
 * Max35Text references in the SEPA character set, IBAN/BIC formats, amounts with two decimals, and
 * that NbOfTxs and CtrlSum equal the count and the sum of the transactions.
 */
class PainExportTest {
  static final String NS = PayoutExports.PAIN_001_001_03;
  static final ApiSettings.PayoutDebtor DEBTOR =
      new ApiSettings.PayoutDebtor("Tickmark B.V. & Co", "NL91ABNA0417164300", "ABNANL2A");
  static final Pattern SEPA_REFERENCE = Pattern.compile("[A-Za-z0-9/\\-?:().,'+ ]{1,35}");
  static final Pattern AMOUNT = Pattern.compile("\\d{1,15}\\.\\d{2}");

  static PayoutRun.RunView run() {
    List<PayoutRun.PaymentView> payouts =
        List.of(
            new PayoutRun.PaymentView(
                "acc_a",
                "pr_1:acc_a",
                12_340_000,
                "paid",
                null,
                new Account.PayoutDetails(
                    "Zoë Müller <ACME> \"Labs\"", "DE89370400440532013000", "COBADEFFXXX"),
                null),
            new PayoutRun.PaymentView(
                "acc_b",
                "pr_1:acc_b",
                25_000_000,
                "refused",
                "insufficient_earnings",
                new Account.PayoutDetails("Bob", "FR1420041010050500013M02606", null),
                null),
            new PayoutRun.PaymentView(
                "acc_c",
                "pr_1:acc_c",
                1_000_000_010_000L,
                "paid",
                null,
                new Account.PayoutDetails("=HYPERLINK(\"x\")", "BE68539007547034", null),
                null));
    return new PayoutRun.RunView(
        "pr_1",
        "completed",
        10_000_000,
        Instant.parse("2026-11-29T21:59:38.123Z"),
        Instant.parse("2026-11-29T21:59:39Z"),
        Instant.parse("2026-11-29T21:59:40Z"),
        1_000_012_350_000L,
        2,
        payouts,
        List.of(),
        0);
  }

  @Test
  void writesAWellFormedSepaCreditTransferWhoseControlTotalsMatchItsTransactions()
      throws Exception {
    String xml = PayoutExports.pain001(run(), DEBTOR);
    Element doc = parse(xml).getDocumentElement();
    assertEquals("Document", doc.getLocalName());
    assertEquals(NS, doc.getNamespaceURI());
    Element initiation = only(doc, "CstmrCdtTrfInitn");
    assertEquals(List.of("GrpHdr", "PmtInf"), children(initiation));

    Element header = only(initiation, "GrpHdr");
    assertEquals(List.of("MsgId", "CreDtTm", "NbOfTxs", "CtrlSum", "InitgPty"), children(header));
    assertTrue(SEPA_REFERENCE.matcher(text(header, "MsgId")).matches());
    assertEquals("2026-11-29T21:59:38", text(header, "CreDtTm"));

    Element payment = only(initiation, "PmtInf");
    List<String> expectedOrder =
        new ArrayList<>(
            List.of(
                "PmtInfId",
                "PmtMtd",
                "BtchBookg",
                "NbOfTxs",
                "CtrlSum",
                "PmtTpInf",
                "ReqdExctnDt",
                "Dbtr",
                "DbtrAcct",
                "DbtrAgt",
                "ChrgBr"));
    List<String> actual = children(payment);
    assertEquals(expectedOrder, actual.subList(0, expectedOrder.size()));
    assertTrue(
        actual.subList(expectedOrder.size(), actual.size()).stream()
            .allMatch("CdtTrfTxInf"::equals));
    assertEquals("TRF", text(payment, "PmtMtd"));
    assertEquals("true", text(payment, "BtchBookg"));
    assertEquals("SEPA", text(only(only(payment, "PmtTpInf"), "SvcLvl"), "Cd"));
    assertEquals("2026-11-29", text(payment, "ReqdExctnDt"));
    assertEquals("SLEV", text(payment, "ChrgBr"));
    assertEquals("Tickmark B.V. + Co", text(only(payment, "Dbtr"), "Nm"));
    assertEquals(DEBTOR.iban(), text(only(only(payment, "DbtrAcct"), "Id"), "IBAN"));
    assertEquals(DEBTOR.bic(), text(only(only(payment, "DbtrAgt"), "FinInstnId"), "BIC"));

    List<Element> transfers = all(payment, "CdtTrfTxInf");
    assertEquals(2, transfers.size(), "only paid payouts are transferred");
    BigDecimal sum = BigDecimal.ZERO;
    List<String> endToEnd = new ArrayList<>();
    for (Element t : transfers) {
      List<String> order = children(t);
      assertEquals(List.of("PmtId", "Amt"), order.subList(0, 2));
      assertEquals(
          List.of("Cdtr", "CdtrAcct", "RmtInf"), order.subList(order.size() - 3, order.size()));
      String id = text(only(t, "PmtId"), "EndToEndId");
      assertTrue(SEPA_REFERENCE.matcher(id).matches(), id);
      endToEnd.add(id);
      Element amount = only(only(t, "Amt"), "InstdAmt");
      assertEquals("EUR", amount.getAttribute("Ccy"));
      assertTrue(AMOUNT.matcher(amount.getTextContent()).matches(), amount.getTextContent());
      sum = sum.add(new BigDecimal(amount.getTextContent()));
      String iban = text(only(only(t, "CdtrAcct"), "Id"), "IBAN");
      assertTrue(Iban.isValid(iban), iban);
      String name = text(only(t, "Cdtr"), "Nm");
      assertTrue(name.length() <= 70 && Pattern.matches("[A-Za-z0-9/\\-?:().,'+ ]+", name), name);
      assertTrue(text(only(t, "RmtInf"), "Ustrd").length() <= 140);
    }
    assertEquals(
        List.of(PayoutExports.reference("pr_1:acc_a"), PayoutExports.reference("pr_1:acc_c")),
        endToEnd);
    assertEquals("Zoe Muller ACME Labs", text(only(transfers.get(0), "Cdtr"), "Nm"));
    assertEquals("COBADEFFXXX", text(only(only(transfers.get(0), "CdtrAgt"), "FinInstnId"), "BIC"));
    assertTrue(
        children(transfers.get(1)).stream().noneMatch("CdtrAgt"::equals),
        "no BIC, no creditor agent (IBAN-only)");

    for (Element counted : List.of(header, payment)) {
      assertEquals(Integer.toString(transfers.size()), text(counted, "NbOfTxs"));
      assertEquals(
          0,
          sum.compareTo(new BigDecimal(text(counted, "CtrlSum"))),
          "CtrlSum is the sum of the amounts");
      assertTrue(AMOUNT.matcher(text(counted, "CtrlSum")).matches());
    }
    assertEquals("1000012.35", text(header, "CtrlSum"));
  }

  @Test
  void theSameRunExportsTheSameBytes() {
    assertEquals(PayoutExports.pain001(run(), DEBTOR), PayoutExports.pain001(run(), DEBTOR));
    assertEquals(PayoutExports.csv(run()), PayoutExports.csv(run()));
  }

  @Test
  void aDebtorWithoutBicNamesItsBankNotProvided() throws Exception {
    String xml =
        PayoutExports.pain001(
            run(), new ApiSettings.PayoutDebtor("Tickmark", "NL91ABNA0417164300", null));
    Element agent =
        only(
            only((Element) parse(xml).getElementsByTagNameNS(NS, "PmtInf").item(0), "DbtrAgt"),
            "FinInstnId");
    assertEquals("NOTPROVIDED", text(only(agent, "Othr"), "Id"));
  }

  @Test
  void csvListsPaidPayoutsWithBothAmountFormsAndDefusesFormulas() {
    String[] lines = PayoutExports.csv(run()).split("\r\n");
    assertEquals(
        "run_id,payout_id,end_to_end_id,account_id,holder_name,iban,bic,amount,amount_eur,currency",
        lines[0]);
    assertEquals(3, lines.length);
    assertEquals(
        "pr_1,pr_1:acc_a,"
            + PayoutExports.reference("pr_1:acc_a")
            + ",acc_a,\"Zoë Müller <ACME> \"\"Labs\"\"\","
            + "DE89370400440532013000,COBADEFFXXX,12.340000,12.34,EUR",
        lines[1]);
    assertTrue(lines[2].contains(",\"'=HYPERLINK(\"\"x\"\")\","), lines[2]);
    assertTrue(lines[2].endsWith(",1000000.010000,1000000.01,EUR"), lines[2]);
  }

  @Test
  void referencesAreSepaSafeAndAtMost35Characters() {
    String ref =
        PayoutExports.reference("pr_0123456789abcdef01234567:acc_0123456789abcdef01234567");
    assertTrue(SEPA_REFERENCE.matcher(ref).matches());
    assertEquals(34, ref.length());
    assertFalse(
        ref.equals(
            PayoutExports.reference("pr_0123456789abcdef01234567:acc_0123456789abcdef01234568")));
    assertEquals("12.34", PayoutExports.euros(12_345_678));
  }

  // ---------------------------------------------------------------------------------------------

  static Document parse(String xml) throws Exception {
    DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
    factory.setNamespaceAware(true);
    factory.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
    return factory
        .newDocumentBuilder()
        .parse(new ByteArrayInputStream(xml.getBytes(StandardCharsets.UTF_8)));
  }

  static List<String> children(Element parent) {
    List<String> names = new ArrayList<>();
    for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
      if (n instanceof Element e) {
        assertEquals(NS, e.getNamespaceURI(), e.getLocalName());
        names.add(e.getLocalName());
      }
    }
    return names;
  }

  static List<Element> all(Element parent, String name) {
    List<Element> found = new ArrayList<>();
    for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
      if (n instanceof Element e && e.getLocalName().equals(name)) found.add(e);
    }
    return found;
  }

  static Element only(Element parent, String name) {
    List<Element> found = all(parent, name);
    assertEquals(1, found.size(), "one " + name + " in " + parent.getLocalName());
    return found.get(0);
  }

  static String text(Element parent, String name) {
    return only(parent, name).getTextContent();
  }
}
