package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import io.swagger.v3.oas.models.media.Schema;
import java.io.IOException;
import java.lang.reflect.RecordComponent;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The document's schemas against the records the routes read and write: the properties of each are
 * exactly the record's components in snake_case, as {@link Json} maps them. Unknown request fields
 * are refused, so a request schema with a field too many or too few misleads clients as much as a
 * response one.
 */
class OpenApiSchemaTest {
  /** Schema name → the record it describes (by name: some are package-private elsewhere). */
  static final Map<String, String> RECORDS =
      Map.ofEntries(
          // answers
          Map.entry("Account", "dev.tickmark.http.AccountView"),
          Map.entry("PayoutDetails", "dev.tickmark.http.AccountView$PayoutDetailsView"),
          Map.entry(
              "PendingPayoutDetails", "dev.tickmark.http.AccountView$PendingPayoutDetailsView"),
          Map.entry("PayoutReturned", "dev.tickmark.http.AccountView$PayoutReturnedView"),
          Map.entry("SignUpResult", "dev.tickmark.http.AccountRoutes$SignUpResponse"),
          Map.entry("CreatedApiKey", "dev.tickmark.http.AccountRoutes$CreatedKeyView"),
          Map.entry("ApiKey", "dev.tickmark.http.AccountRoutes$KeyView"),
          Map.entry("ApiKeyList", "dev.tickmark.http.AccountRoutes$KeyList"),
          Map.entry("LedgerEntry", "dev.tickmark.http.AccountRoutes$EntryView"),
          Map.entry("LedgerPage", "dev.tickmark.http.AccountRoutes$Statement"),
          Map.entry("AuditTrail", "dev.tickmark.http.AccountRoutes$AuditTrail"),
          Map.entry("AuditEntry", "dev.tickmark.persistence.ledger.LedgerReadModel$AuditEntry"),
          Map.entry("SshKey", "dev.tickmark.http.AccountRoutes$SshKeyView"),
          Map.entry("SshKeyList", "dev.tickmark.http.AccountRoutes$SshKeyList"),
          Map.entry("PaymentReceipt", "dev.tickmark.http.PaymentRoutes$Receipt"),
          Map.entry("RegistrationToken", "dev.tickmark.http.HostRoutes$TokenView"),
          Map.entry("Host", "dev.tickmark.http.HostViews$HostDetail"),
          Map.entry("HostSummary", "dev.tickmark.http.HostViews$HostSummary"),
          Map.entry("HostPage", "dev.tickmark.http.HostViews$HostList"),
          Map.entry("HostRental", "dev.tickmark.http.HostViews$HostRentalView"),
          Map.entry("HostRentalPage", "dev.tickmark.http.HostViews$HostRentalList"),
          Map.entry("OpsRental", "dev.tickmark.http.OpsRentalRoutes$OpsRentalView"),
          Map.entry("Refund", "dev.tickmark.http.OpsRentalRoutes$RefundView"),
          Map.entry("RentalRefund", "dev.tickmark.http.OpsRentalRoutes$RefundEntry"),
          Map.entry("RefundRequest", "dev.tickmark.http.OpsRentalRoutes$RefundRequest"),
          Map.entry("OpsHostRental", "dev.tickmark.http.OpsRentalRoutes$OpsHostRental"),
          Map.entry("OpsHostRentalPage", "dev.tickmark.http.OpsRentalRoutes$OpsHostRentalList"),
          Map.entry("HostRentalTotals", "dev.tickmark.http.HostViews$HostRentalTotals"),
          Map.entry("Card", "dev.tickmark.http.HostViews$CardView"),
          Map.entry("Listing", "dev.tickmark.http.HostViews$ListingView"),
          Map.entry("Window", "dev.tickmark.http.HostViews$WindowView"),
          Map.entry("Check", "dev.tickmark.http.HostViews$CheckView"),
          Map.entry("HostRuntime", "dev.tickmark.http.HostViews$RuntimeView"),
          Map.entry("Gpu", "dev.tickmark.http.MarketRoutes$GpuView"),
          Map.entry("GpuList", "dev.tickmark.http.MarketRoutes$GpuList"),
          Map.entry("Region", "dev.tickmark.engine.catalog.Catalog$Region"),
          Map.entry("RegionList", "dev.tickmark.http.MarketRoutes$RegionList"),
          Map.entry("Offer", "dev.tickmark.http.MarketRoutes$OfferView"),
          Map.entry("OfferList", "dev.tickmark.http.MarketRoutes$OfferList"),
          Map.entry("Rental", "dev.tickmark.http.RentalRoutes$RentalView"),
          Map.entry("RentalEnvelope", "dev.tickmark.http.RentalRoutes$LaunchResponse"),
          Map.entry("RentalPage", "dev.tickmark.http.RentalRoutes$RentalList"),
          Map.entry("Checkpoint", "dev.tickmark.http.RentalRoutes$CheckpointView"),
          Map.entry("Usage", "dev.tickmark.http.RentalRoutes$Usage"),
          Map.entry("TickEvent", "dev.tickmark.http.RentalRoutes$TickEvent"),
          Map.entry("PreemptionEvent", "dev.tickmark.http.RentalRoutes$PreemptionEvent"),
          Map.entry("LogLine", "dev.tickmark.http.RentalLogRoutes$LineView"),
          Map.entry("LogPage", "dev.tickmark.http.RentalLogRoutes$Page"),
          Map.entry("LogEndEvent", "dev.tickmark.http.RentalLogRoutes$EndEvent"),
          Map.entry("Snapshot", "dev.tickmark.http.SnapshotRoutes$SnapshotView"),
          Map.entry("SnapshotPage", "dev.tickmark.http.SnapshotRoutes$SnapshotList"),
          Map.entry("SnapshotEnvelope", "dev.tickmark.http.agent.SnapshotTransferRoutes$Completed"),
          Map.entry("MissingChunks", "dev.tickmark.http.agent.SnapshotTransferRoutes$Missing"),
          Map.entry(
              "RestoreManifest", "dev.tickmark.http.agent.SnapshotTransferRoutes$RestoreManifest"),
          Map.entry("OpsAccount", "dev.tickmark.http.OpsRoutes$OpsAccountView"),
          Map.entry("Deposit", "dev.tickmark.http.OpsRoutes$DepositView"),
          Map.entry("LedgerAudit", "dev.tickmark.http.OpsRoutes$AuditView"),
          Map.entry("OperatorAction", "dev.tickmark.http.OpsRoutes$OperatorActionView"),
          Map.entry("OperatorActionPage", "dev.tickmark.http.OpsRoutes$OperatorActionPage"),
          Map.entry("Payout", "dev.tickmark.http.OpsPayoutRoutes$PaymentView"),
          Map.entry("PayoutSkip", "dev.tickmark.http.OpsPayoutRoutes$SkipView"),
          Map.entry("PayoutRun", "dev.tickmark.http.OpsPayoutRoutes$RunView"),
          Map.entry("PayoutRunSummary", "dev.tickmark.http.OpsPayoutRoutes$RunSummaryView"),
          Map.entry("PayoutRunList", "dev.tickmark.http.OpsPayoutRoutes$RunList"),
          // requests
          Map.entry("SignUpRequest", "dev.tickmark.http.AccountRoutes$SignUpRequest"),
          Map.entry("PayoutDetailsRequest", "dev.tickmark.http.AccountRoutes$PayoutDetailsRequest"),
          Map.entry("ApiKeyRequest", "dev.tickmark.http.AccountRoutes$ApiKeyRequest"),
          Map.entry("SshKeyRequest", "dev.tickmark.http.AccountRoutes$SshKeyRequest"),
          Map.entry("PaymentWebhook", "dev.tickmark.http.PaymentRoutes$PaymentEvent"),
          Map.entry("RegistrationTokenRequest", "dev.tickmark.http.HostRoutes$TokenRequest"),
          Map.entry("ListingRequest", "dev.tickmark.http.HostRoutes$ListingRequest"),
          Map.entry("ReclaimRequest", "dev.tickmark.http.HostRoutes$ReclaimRequest"),
          Map.entry("LaunchRequest", "dev.tickmark.http.RentalRoutes$LaunchRequest"),
          Map.entry("StopRequest", "dev.tickmark.http.RentalRoutes$StopRequest"),
          Map.entry(
              "ManifestRequest", "dev.tickmark.http.agent.SnapshotTransferRoutes$ManifestRequest"),
          Map.entry(
              "FailedRequest", "dev.tickmark.http.agent.SnapshotTransferRoutes$FailedRequest"),
          Map.entry("DepositRequest", "dev.tickmark.http.OpsRoutes$DepositRequest"),
          Map.entry("ReasonRequest", "dev.tickmark.http.OpsRoutes$SuspendRequest"),
          Map.entry("PayoutRunRequest", "dev.tickmark.http.OpsPayoutRoutes$StartRequest"),
          Map.entry("PayoutReturnRequest", "dev.tickmark.http.OpsPayoutRoutes$ReturnRequest"));

  /**
   * Schemas with no record: the wrappers of plain values, and bodies read field by field (the spend
   * cap tells a null cap from a missing field, so it has no record).
   */
  static final Set<String> NO_RECORD =
      Set.of(
          "Money",
          "AmountInput",
          "Sha256",
          "Scope",
          "Tier",
          "RuntimeName",
          "HostStatus",
          "RentalStatus",
          "SnapshotStatus",
          "Problem",
          "Health",
          "SpendCapRequest");

  @BeforeAll
  static void parse() throws IOException {
    OpenApiDocumentTest.parse();
  }

  @Test
  void everySchemaHasExactlyTheFieldsOfItsRecord() throws ClassNotFoundException {
    Map<String, String> wrong = new TreeMap<>();
    PropertyNamingStrategies.NamingBase snake =
        (PropertyNamingStrategies.NamingBase) PropertyNamingStrategies.SNAKE_CASE;
    for (Map.Entry<String, String> e : RECORDS.entrySet()) {
      Schema<?> schema =
          objectOf(OpenApiDocumentTest.doc.getComponents().getSchemas().get(e.getKey()));
      assertNotNull(schema, e.getKey());
      Set<String> documented = new TreeSet<>(schema.getProperties().keySet());
      Set<String> fields = new TreeSet<>();
      RecordComponent[] components = Class.forName(e.getValue()).getRecordComponents();
      assertNotNull(components, e.getValue() + " is no record");
      for (RecordComponent c : components) fields.add(snake.translate(c.getName()));
      if (!documented.equals(fields))
        wrong.put(
            e.getKey(), "documents " + documented + " but " + e.getValue() + " has " + fields);
    }
    assertEquals(Map.of(), wrong);
  }

  @Test
  void everyFieldHasTheJsonTypeOfItsComponent() throws ClassNotFoundException {
    Map<String, String> wrong = new TreeMap<>();
    PropertyNamingStrategies.NamingBase snake =
        (PropertyNamingStrategies.NamingBase) PropertyNamingStrategies.SNAKE_CASE;
    for (Map.Entry<String, String> e : RECORDS.entrySet()) {
      Schema<?> schema =
          objectOf(OpenApiDocumentTest.doc.getComponents().getSchemas().get(e.getKey()));
      for (RecordComponent c : Class.forName(e.getValue()).getRecordComponents()) {
        String field = e.getKey() + "." + snake.translate(c.getName());
        Schema<?> property = schema.getProperties().get(snake.translate(c.getName()));
        if (property == null) continue; // the test above says so
        Set<String> types = types(property);
        String expected = jsonType(c.getType());
        if (!types.contains(expected))
          wrong.put(field, c.getType().getSimpleName() + " but " + types);
        // a primitive is never null on the wire; an object may be, unless the schema says not
        if (c.getType().isPrimitive() && types.contains("null"))
          wrong.put(field, "primitive but null");
      }
    }
    assertEquals(Map.of(), wrong);
  }

  /** The JSON type Jackson writes a component of this type as. */
  static String jsonType(Class<?> type) {
    if (type == String.class || type == java.time.Instant.class) return "string";
    if (type == int.class || type == long.class || type == Integer.class || type == Long.class)
      return "integer";
    if (type == boolean.class || type == Boolean.class) return "boolean";
    if (java.util.List.class.isAssignableFrom(type)) return "array";
    return "object";
  }

  /** The JSON types a schema allows, through $ref and anyOf; "null" among them if it may be. */
  static Set<String> types(Schema<?> schema) {
    Set<String> types = new TreeSet<>();
    if (schema.get$ref() != null) {
      String name = schema.get$ref().substring(schema.get$ref().lastIndexOf('/') + 1);
      return types(OpenApiDocumentTest.doc.getComponents().getSchemas().get(name));
    }
    if (schema.getAnyOf() != null)
      for (Schema<?> option : schema.getAnyOf()) types.addAll(types(option));
    if (schema.getTypes() != null) types.addAll(schema.getTypes());
    if (schema.getType() != null) types.add(schema.getType());
    if (schema.getConst() != null) types.add("string");
    if (schema.getProperties() != null) types.add("object");
    return types;
  }

  @Test
  void everySchemaIsAccountedFor() {
    Set<String> unaccounted =
        new TreeSet<>(OpenApiDocumentTest.doc.getComponents().getSchemas().keySet());
    unaccounted.removeAll(RECORDS.keySet());
    unaccounted.removeAll(NO_RECORD);
    assertEquals(Set.of(), unaccounted, "schemas compared with no record");
  }

  /** The schema a $ref names, or the schema itself. */
  static Schema<?> resolve(Schema<?> schema) {
    if (schema.get$ref() == null) return schema;
    String name = schema.get$ref().substring(schema.get$ref().lastIndexOf('/') + 1);
    return OpenApiDocumentTest.doc.getComponents().getSchemas().get(name);
  }

  /** The object of a schema, or of its non-null alternative ({@code anyOf: [X, null]}). */
  static Schema<?> objectOf(Schema<?> schema) {
    if (schema == null || schema.getProperties() != null) return schema;
    if (schema.getAnyOf() != null)
      for (Schema<?> option : schema.getAnyOf()) if (option.getProperties() != null) return option;
    return null;
  }
}
