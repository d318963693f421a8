package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.MappingIterator;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvFromSource;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.api.model.rbac.RoleBinding;
import io.fabric8.kubernetes.api.model.rbac.Subject;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The manifests in {@code deploy/kubernetes} read into the Kubernetes model classes (fabric8),
 * checked against each other and against the node's own configuration as it resolves with the
 * environment the Deployment gives it: ports, probe paths, the bootstrap's service name and pod
 * label selector, the RBAC the discovery needs.
 */
class KubernetesManifestsTest {
  static final Path MANIFESTS = Path.of("..", "deploy", "kubernetes");
  static final Map<String, Class<? extends HasMetadata>> KINDS =
      Map.of(
          "Deployment",
          Deployment.class,
          "Service",
          Service.class,
          "ConfigMap",
          ConfigMap.class,
          "Secret",
          Secret.class,
          "ServiceAccount",
          ServiceAccount.class,
          "Role",
          Role.class,
          "RoleBinding",
          RoleBinding.class);

  static final List<HasMetadata> resources = new ArrayList<>();
  static Deployment deployment;
  static Container container;
  static Map<String, String> env;
  static Config config;

  @BeforeAll
  static void readManifests() throws IOException {
    ObjectMapper yaml = new ObjectMapper(new YAMLFactory());
    List<Path> files;
    try (Stream<Path> listing = Files.list(MANIFESTS)) {
      files = listing.filter(p -> p.toString().endsWith(".yaml")).sorted().toList();
    }
    assertFalse(files.isEmpty(), "manifests in " + MANIFESTS.toAbsolutePath());
    for (Path file : files) {
      try (MappingIterator<JsonNode> docs =
          yaml.readerFor(JsonNode.class).readValues(file.toFile())) {
        while (docs.hasNext()) {
          JsonNode doc = docs.next();
          if (doc == null || doc.isEmpty()) continue;
          String kind = doc.path("kind").asText();
          Class<? extends HasMetadata> type = KINDS.get(kind);
          assertNotNull(type, file + ": unexpected kind " + kind);
          HasMetadata resource = yaml.treeToValue(doc, type);
          assertNotNull(resource.getMetadata().getName(), file + ": a " + kind + " without a name");
          resources.add(resource);
        }
      }
    }
    deployment = one(Deployment.class, "tickmark");
    container = deployment.getSpec().getTemplate().getSpec().getContainers().get(0);
    env = deploymentEnvironment();
    config = nodeConfig(env);
  }

  @Test
  void theDeploymentRunsThreeLabelledReplicasWithTheNodesPorts() {
    assertEquals(3, deployment.getSpec().getReplicas());
    Map<String, String> labels = deployment.getSpec().getTemplate().getMetadata().getLabels();
    assertEquals("tickmark", labels.get("app"));
    assertEquals(deployment.getSpec().getSelector().getMatchLabels(), Map.of("app", "tickmark"));
    NodeSettings settings = NodeSettings.fromEnvironment(env);
    assertEquals(NodeSettings.Discovery.KUBERNETES, settings.discovery());
    assertEquals(Map.of("http", 8080, "management", 8558, "remoting", 25520), containerPorts());
    assertEquals(containerPorts().get("http"), settings.httpPort());
    assertEquals(containerPorts().get("http"), config.getInt("tickmark.http.port"));
    assertEquals(containerPorts().get("management"), settings.managementPort());
    assertEquals(containerPorts().get("management"), config.getInt("pekko.management.http.port"));
    assertEquals(containerPorts().get("remoting"), settings.remotePort());
    assertEquals(
        containerPorts().get("remoting"), config.getInt("pekko.remote.artery.canonical.port"));
    // The API must listen beyond the pod's loopback; remoting and management bind the pod IP.
    assertEquals("0.0.0.0", config.getString("tickmark.http.interface"));
    EnvVar hostname =
        container.getEnv().stream()
            .filter(e -> e.getName().equals("TICKMARK_HOSTNAME"))
            .findFirst()
            .orElseThrow();
    assertEquals("status.podIP", hostname.getValueFrom().getFieldRef().getFieldPath());
    assertTrue(
        deployment.getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds() >= 30,
        "time for coordinated shutdown");
    assertNotNull(container.getResources().getRequests().get("cpu"));
    assertNotNull(container.getResources().getLimits().get("memory"));
  }

  @Test
  void probesAskPekkoManagementsHealthChecks() {
    Probe readiness = container.getReadinessProbe();
    Probe liveness = container.getLivenessProbe();
    assertEquals(
        "/" + config.getString("pekko.management.health-checks.readiness-path"),
        readiness.getHttpGet().getPath());
    assertEquals(
        "/" + config.getString("pekko.management.health-checks.liveness-path"),
        liveness.getHttpGet().getPath());
    for (Probe probe : List.of(readiness, liveness)) {
      assertEquals(
          "management",
          probe.getHttpGet().getPort().getStrVal(),
          "probes go to the management port by name");
    }
    // Readiness includes cluster membership (pekko-management-cluster-http): a pod takes traffic
    // once it joined.
    assertTrue(
        config.hasPath("pekko.management.health-checks.readiness-checks.cluster-membership"));
  }

  @Test
  void bootstrapFindsThePodsOfTheDeployment() {
    assertEquals("kubernetes", config.getString("tickmark.cluster.discovery"));
    Config bootstrap =
        config.getConfig("pekko.management.cluster.bootstrap.contact-point-discovery");
    assertEquals("kubernetes-api", bootstrap.getString("discovery-method"));
    String service = bootstrap.getString("service-name");
    assertEquals("tickmark", service);
    String selector =
        String.format(
            config.getString("pekko.discovery.kubernetes-api.pod-label-selector"), service);
    String[] label = selector.split("=", 2);
    assertEquals(
        label[1],
        deployment.getSpec().getTemplate().getMetadata().getLabels().get(label[0]),
        "the pod label selector " + selector + " selects the Deployment's pods");
    assertTrue(
        containerPorts().containsKey(bootstrap.getString("port-name")),
        "contact points are probed on a named port");
    assertTrue(bootstrap.getInt("required-contact-point-nr") <= deployment.getSpec().getReplicas());
    assertTrue(
        config
            .getString("pekko.cluster.downing-provider-class")
            .endsWith("SplitBrainResolverProvider"));
  }

  @Test
  void theServiceAccountMayListPods() {
    String account = deployment.getSpec().getTemplate().getSpec().getServiceAccountName();
    one(ServiceAccount.class, account);
    RoleBinding binding =
        resources.stream()
            .filter(RoleBinding.class::isInstance)
            .map(RoleBinding.class::cast)
            .findFirst()
            .orElseThrow();
    Subject subject = binding.getSubjects().get(0);
    assertEquals("ServiceAccount", subject.getKind());
    assertEquals(
        account, subject.getName(), "the RoleBinding binds the Deployment's service account");
    assertEquals("Role", binding.getRoleRef().getKind());
    Role role = one(Role.class, binding.getRoleRef().getName());
    PolicyRule pods =
        role.getRules().stream()
            .filter(r -> r.getResources().contains("pods"))
            .findFirst()
            .orElseThrow();
    assertEquals(List.of(""), pods.getApiGroups());
    assertTrue(
        pods.getVerbs().containsAll(List.of("get", "watch", "list")), pods.getVerbs().toString());
  }

  @Test
  void servicesReachTheNamedPorts() {
    Map<String, String> podLabels = deployment.getSpec().getTemplate().getMetadata().getLabels();
    Service api = one(Service.class, "tickmark");
    assertEquals(Map.of("app", "tickmark"), api.getSpec().getSelector());
    assertTrue(podLabels.entrySet().containsAll(api.getSpec().getSelector().entrySet()));
    assertEquals(
        Set.of("http"),
        api.getSpec().getPorts().stream()
            .map(p -> p.getTargetPort().getStrVal())
            .collect(Collectors.toSet()));
    Service management = one(Service.class, "tickmark-management");
    assertEquals("None", management.getSpec().getClusterIP());
    assertEquals(api.getSpec().getSelector(), management.getSpec().getSelector());
    for (Service s : List.of(api, management)) {
      for (ServicePort p : s.getSpec().getPorts()) {
        assertTrue(
            containerPorts().containsKey(p.getTargetPort().getStrVal()),
            s.getMetadata().getName() + " targets " + p.getTargetPort());
      }
    }
  }

  @Test
  void theNodeServesTlsWithTheCertificateOfAMountedTlsSecret() {
    var mount =
        container.getVolumeMounts().stream()
            .filter(m -> m.getName().equals("tls"))
            .findFirst()
            .orElseThrow();
    assertTrue(Boolean.TRUE.equals(mount.getReadOnly()), "the TLS Secret is mounted read-only");
    var volume =
        deployment.getSpec().getTemplate().getSpec().getVolumes().stream()
            .filter(v -> v.getName().equals("tls"))
            .findFirst()
            .orElseThrow();
    assertEquals("tickmark-tls", volume.getSecret().getSecretName());
    assertTrue(
        volume.getSecret().getOptional() == null || !volume.getSecret().getOptional(),
        "a missing certificate stops the pod, it never serves plain HTTP by accident");
    // a kubernetes.io/tls Secret's keys, where the node reads them
    assertEquals(mount.getMountPath() + "/tls.crt", env.get(ServerTls.CERT_ENV));
    assertEquals(mount.getMountPath() + "/tls.key", env.get(ServerTls.KEY_ENV));
    assertEquals(
        mount.getMountPath() + "/tls.crt", config.getString("tickmark.http.tls.certificate"));
    assertEquals(
        mount.getMountPath() + "/tls.key", config.getString("tickmark.http.tls.private-key"));
    // the image's user (deploy/Dockerfile: uid 10001) reads the 0440 files through fsGroup
    assertEquals(
        10001L, deployment.getSpec().getTemplate().getSpec().getSecurityContext().getFsGroup());
    assertEquals(0440, volume.getSecret().getDefaultMode());
    Service api = one(Service.class, "tickmark");
    assertEquals(443, api.getSpec().getPorts().get(0).getPort());
  }

  @Test
  void theNodesSpeakMutualTlsWithTheCertificateOfAMountedClusterSecret() {
    var mount =
        container.getVolumeMounts().stream()
            .filter(m -> m.getName().equals("cluster-tls"))
            .findFirst()
            .orElseThrow();
    assertTrue(
        Boolean.TRUE.equals(mount.getReadOnly()), "the cluster's Secret is mounted read-only");
    var volume =
        deployment.getSpec().getTemplate().getSpec().getVolumes().stream()
            .filter(v -> v.getName().equals("cluster-tls"))
            .findFirst()
            .orElseThrow();
    assertEquals("tickmark-cluster-tls", volume.getSecret().getSecretName());
    assertTrue(
        volume.getSecret().getOptional() == null || !volume.getSecret().getOptional(),
        "a missing cluster certificate stops the pod, it never joins over plain remoting by accident");
    assertEquals(0440, volume.getSecret().getDefaultMode());
    // cert-manager's Secret keys, where the node reads them
    assertEquals(mount.getMountPath() + "/tls.crt", env.get(ClusterTls.CERT_ENV));
    assertEquals(mount.getMountPath() + "/tls.key", env.get(ClusterTls.KEY_ENV));
    assertEquals(mount.getMountPath() + "/ca.crt", env.get(ClusterTls.CA_ENV));
    assertEquals(mount.getMountPath() + "/tls.crt", config.getString(ClusterTls.CERT_KEY));
    assertEquals(mount.getMountPath() + "/tls.key", config.getString(ClusterTls.PRIVATE_KEY_KEY));
    assertEquals(mount.getMountPath() + "/ca.crt", config.getString(ClusterTls.CA_KEY));
    assertTrue(
        !mount.getMountPath().startsWith("/etc/tickmark/tls/")
            && !"/etc/tickmark/tls".equals(mount.getMountPath()),
        "the cluster's CA is not the public HTTPS certificate's");
  }

  @Test
  void configurationComesFromTheConfigMapAndATemplateSecret() {
    List<String> configMaps = new ArrayList<>();
    List<String> secrets = new ArrayList<>();
    for (EnvFromSource from : container.getEnvFrom()) {
      if (from.getConfigMapRef() != null) configMaps.add(from.getConfigMapRef().getName());
      if (from.getSecretRef() != null) secrets.add(from.getSecretRef().getName());
    }
    assertEquals(1, configMaps.size());
    assertEquals(1, secrets.size());
    one(ConfigMap.class, configMaps.get(0));
    Secret secret = one(Secret.class, secrets.get(0));
    Map<String, String> values = secret.getStringData();
    assertEquals(
        Set.of(
            "TICKMARK_DB_URL",
            "TICKMARK_DB_USER",
            "TICKMARK_DB_PASSWORD",
            "TICKMARK_OPERATOR_TOKEN",
            "TICKMARK_PAYMENT_WEBHOOK_SECRET"),
        values.keySet());
    for (String key :
        List.of(
            "TICKMARK_DB_PASSWORD", "TICKMARK_OPERATOR_TOKEN", "TICKMARK_PAYMENT_WEBHOOK_SECRET")) {
      assertTrue(values.get(key).contains("CHANGE-ME"), key + " is a placeholder, not a secret");
    }
    assertTrue(
        secret.getData() == null || secret.getData().isEmpty(),
        "no encoded values hide in the template");
    // A node given the template's values as they stand refuses to start, naming the value.
    for (String key :
        List.of(
            "TICKMARK_DB_PASSWORD", "TICKMARK_OPERATOR_TOKEN", "TICKMARK_PAYMENT_WEBHOOK_SECRET")) {
      IllegalArgumentException refused =
          org.junit.jupiter.api.Assertions.assertThrows(
              IllegalArgumentException.class,
              () -> NodeSettings.fromEnvironment(Map.of(key, values.get(key))),
              key);
      assertTrue(refused.getMessage().startsWith(key), refused.getMessage());
    }
    // The database URL names the Service that stands for PostgreSQL.
    Service postgres = one(Service.class, "tickmark-postgres");
    assertEquals("ExternalName", postgres.getSpec().getType());
    int port = postgres.getSpec().getPorts().get(0).getPort();
    assertTrue(
        values
            .get("TICKMARK_DB_URL")
            .startsWith("jdbc:postgresql://tickmark-postgres:" + port + "/"),
        values.get("TICKMARK_DB_URL"));
  }

  // ---- helpers
  // ------------------------------------------------------------------------------------

  /**
   * The environment the node process sees: the ConfigMap and Secret (envFrom), then the container's
   * own env.
   */
  private static Map<String, String> deploymentEnvironment() {
    Map<String, String> environment = new HashMap<>();
    for (EnvFromSource from : container.getEnvFrom()) {
      if (from.getConfigMapRef() != null)
        environment.putAll(one(ConfigMap.class, from.getConfigMapRef().getName()).getData());
      if (from.getSecretRef() != null) {
        // The template's placeholders, replaced as its header says (a node refuses them as such).
        one(Secret.class, from.getSecretRef().getName())
            .getStringData()
            .forEach(
                (k, v) ->
                    environment.put(
                        k, NodeSettings.placeholder(v) ? "tmkop_" + NodeSettings.random(32) : v));
      }
    }
    for (EnvVar v : container.getEnv()) {
      // A field reference is filled in by the kubelet: the pod IP stands in as an address.
      environment.put(v.getName(), v.getValue() != null ? v.getValue() : "10.1.2.3");
    }
    return environment;
  }

  /**
   * The node's configuration (application.conf over every reference.conf), resolved with only
   * {@code env}.
   */
  private static Config nodeConfig(Map<String, String> env) {
    Config unresolved =
        ConfigFactory.parseResourcesAnySyntax("application")
            .withFallback(ConfigFactory.parseResourcesAnySyntax("reference"));
    return ConfigFactory.parseMap(env)
        .withFallback(unresolved)
        .resolve(ConfigResolveOptions.defaults().setUseSystemEnvironment(false));
  }

  private static Map<String, Integer> containerPorts() {
    return container.getPorts().stream()
        .collect(Collectors.toMap(ContainerPort::getName, ContainerPort::getContainerPort));
  }

  private static <T extends HasMetadata> T one(Class<T> type, String name) {
    List<T> found =
        resources.stream()
            .filter(type::isInstance)
            .map(type::cast)
            .filter(r -> name.equals(r.getMetadata().getName()))
            .toList();
    assertEquals(1, found.size(), "one " + type.getSimpleName() + " named " + name);
    return found.get(0);
  }
}
