package dev.tickmark.node;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code java -jar cluster-config/target/tickmark-node.jar}: starts one node as the environment
 * says.
 */
public final class Main {
  static {
    CommonPool.ensureParallelism(); // before anything creates the common pool
  }

  private static final Logger log = LoggerFactory.getLogger(Main.class);

  private Main() {}

  public static void main(String[] args) {
    NodeSettings settings;
    Node node;
    try {
      settings = NodeSettings.fromEnvironment(System.getenv());
    } catch (IllegalArgumentException e) {
      // a setting the operator must fix: the one line says which and how, no stack trace
      log.error("Tickmark node failed to start: {}", e.getMessage());
      System.exit(1);
      return;
    }
    try {
      log.info("Starting Tickmark node with {}", settings);
      node = Node.start(settings);
    } catch (ServerTls.UnusableFiles e) {
      // the message names the variable, the file and the fix; never key material
      log.error("Tickmark node failed to start: {}", e.getMessage());
      System.exit(1);
      return;
    } catch (Exception e) {
      log.error("Tickmark node failed to start: {}", e.getMessage(), e);
      System.exit(1);
      return;
    }
    try {
      Banner banner = new Banner(node);
      if (settings.dev()) banner.printDev(DevBootstrap.seed(node));
      else banner.printProduction();
    } catch (Exception e) {
      log.error("Tickmark dev bootstrap failed: {}", e.getMessage(), e);
      node.system().terminate();
    }
  }
}
