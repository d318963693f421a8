package dev.tickmark.node;

import dev.tickmark.node.ServerTls.UnusableFiles;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.Signature;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;

/**
 * Reads the PEM files a node's TLS identities come from (the HTTPS one, {@link ServerTls}, and the
 * cluster's, {@link ClusterTls}). Every problem is an {@link UnusableFiles} whose message names the
 * environment variable, the file and the fix; no message ever holds key material.
 */
final class PemFiles {
  /** Key types tried for a PKCS#8 key, the certificate's own type first. */
  private static final List<String> KEY_TYPES = List.of("RSA", "EC", "Ed25519", "Ed448");

  private static final Pattern PEM_BLOCK =
      Pattern.compile(
          "-----BEGIN ([A-Z0-9 ]+)-----\\s*([A-Za-z0-9+/=\\s]*?)\\s*-----END \\1-----",
          Pattern.DOTALL);

  private PemFiles() {}

  /** A certificate chain (the holder's own first) and the private key of its first certificate. */
  record Identity(List<X509Certificate> chain, KeyManager[] keyManagers) {}

  /**
   * Reads and checks a chain and its key: the chain parses, the key is PKCS#8 and belongs to the
   * chain's first certificate ({@code certVar} and {@code keyVar} name the files in messages).
   */
  static Identity identity(String certVar, Path certificateFile, String keyVar, Path keyFile)
      throws UnusableFiles {
    List<X509Certificate> chain = readChain(certVar, keyVar, certificateFile);
    PrivateKey key = readKey(keyVar, certVar, keyFile, chain.get(0).getPublicKey().getAlgorithm());
    if (!belongsTo(key, chain.get(0).getPublicKey())) {
      for (int i = 1; i < chain.size(); i++) {
        if (belongsTo(key, chain.get(i).getPublicKey()))
          throw new UnusableFiles(
              certVar
                  + " ("
                  + certificateFile
                  + "): the key in "
                  + keyVar
                  + " belongs to certificate "
                  + (i + 1)
                  + " of the chain; put the node's own certificate first, then its issuers");
      }
      throw new UnusableFiles(
          keyVar
              + " ("
              + keyFile
              + ") is not the private key of the certificate in "
              + certVar
              + " ("
              + certificateFile
              + ", "
              + chain.get(0).getSubjectX500Principal().getName()
              + "): give the key the certificate was issued for");
    }
    try {
      KeyStore store = KeyStore.getInstance("PKCS12");
      store.load(null, null);
      char[] noPassword = new char[0];
      store.setKeyEntry("tickmark", key, noPassword, chain.toArray(new X509Certificate[0]));
      KeyManagerFactory keys =
          KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      keys.init(store, noPassword);
      return new Identity(List.copyOf(chain), keys.getKeyManagers());
    } catch (GeneralSecurityException | IOException e) {
      throw new UnusableFiles(
          "the JDK refused the certificate and key from "
              + certVar
              + " and "
              + keyVar
              + ": "
              + e.getClass().getSimpleName());
    }
  }

  /** Every certificate in {@code file} (at least one), e.g. the CAs a node trusts. */
  static List<X509Certificate> certificates(String variable, Path file) throws UnusableFiles {
    return readChain(variable, null, file);
  }

  /** The certificate's subject alternative names as text (DNS names, IP addresses, …). */
  static List<String> subjectAltNames(X509Certificate cert) {
    try {
      Collection<List<?>> names = cert.getSubjectAlternativeNames();
      if (names == null) return List.of();
      List<String> out = new ArrayList<>();
      for (List<?> name : names) out.add(String.valueOf(name.get(1)));
      return out;
    } catch (CertificateParsingException e) {
      return List.of();
    }
  }

  /** The certificate's DNS names (subject alternative names of type dNSName). */
  static Set<String> dnsNames(X509Certificate cert) {
    Set<String> out = new LinkedHashSet<>();
    try {
      Collection<List<?>> names = cert.getSubjectAlternativeNames();
      if (names != null)
        for (List<?> name : names)
          if (Integer.valueOf(2).equals(name.get(0))) out.add(String.valueOf(name.get(1)));
    } catch (CertificateParsingException e) {
      // none
    }
    return out;
  }

  private record Block(String label, byte[] der) {}

  private static List<Block> blocks(String variable, Path file) throws UnusableFiles {
    String text;
    try {
      // Latin-1 reads any byte: a comment in UTF-8 beside the blocks does no harm
      text = Files.readString(file, StandardCharsets.ISO_8859_1);
    } catch (IOException e) {
      throw new UnusableFiles(
          variable + " (" + file + ") cannot be read: " + e.getClass().getSimpleName());
    }
    List<Block> blocks = new ArrayList<>();
    Matcher m = PEM_BLOCK.matcher(text);
    while (m.find()) {
      try {
        blocks.add(new Block(m.group(1), Base64.getMimeDecoder().decode(m.group(2))));
      } catch (IllegalArgumentException e) {
        throw new UnusableFiles(
            variable + " (" + file + "): a \"" + m.group(1) + "\" PEM block is not valid base64");
      }
    }
    if (blocks.isEmpty() && !text.isEmpty() && text.charAt(0) == 0x30)
      throw new UnusableFiles(
          variable
              + " ("
              + file
              + ") is binary DER, not PEM: convert it, e.g. openssl x509 -inform der -in "
              + file
              + " -out cert.pem (a key: openssl pkcs8 -topk8 -nocrypt -inform der -in …)");
    return blocks;
  }

  /** {@code keyVar}: the key's variable, for the "swapped?" hint; null when there is none. */
  private static List<X509Certificate> readChain(String certVar, String keyVar, Path file)
      throws UnusableFiles {
    List<Block> blocks = blocks(certVar, file);
    List<X509Certificate> chain = new ArrayList<>();
    Set<String> others = new LinkedHashSet<>();
    for (Block block : blocks) {
      if (!block.label().equals("CERTIFICATE")) {
        others.add(block.label());
        continue;
      }
      try {
        chain.add(
            (X509Certificate)
                CertificateFactory.getInstance("X.509")
                    .generateCertificate(new ByteArrayInputStream(block.der())));
      } catch (CertificateException e) {
        throw new UnusableFiles(
            certVar
                + " ("
                + file
                + "): certificate "
                + (chain.size() + 1)
                + " is not an X.509 certificate");
      }
    }
    if (chain.isEmpty())
      throw new UnusableFiles(
          certVar
              + " ("
              + file
              + ") holds no \"BEGIN CERTIFICATE\" block"
              + (others.stream().anyMatch(l -> l.contains("PRIVATE KEY"))
                  ? keyVar == null
                      ? " but a private key"
                      : " but a private key: are " + certVar + " and " + keyVar + " swapped?"
                  : others.isEmpty() ? "" : " (found " + others + ")"));
    return chain;
  }

  private static PrivateKey readKey(
      String keyVar, String certVar, Path file, String certificateKeyType) throws UnusableFiles {
    List<Block> blocks = blocks(keyVar, file);
    Block pkcs8 = null;
    for (Block block : blocks) {
      switch (block.label()) {
        case "PRIVATE KEY" -> pkcs8 = pkcs8 == null ? block : pkcs8;
        case "RSA PRIVATE KEY", "EC PRIVATE KEY" ->
            throw new UnusableFiles(
                keyVar
                    + " ("
                    + file
                    + ") is a \"BEGIN "
                    + block.label()
                    + "\" key (PKCS#1/SEC1); the node reads PKCS#8 (\"BEGIN PRIVATE KEY\"). Convert"
                    + " it: openssl pkcs8 -topk8 -nocrypt -in "
                    + file
                    + " -out key.pkcs8.pem");
        case "ENCRYPTED PRIVATE KEY" ->
            throw new UnusableFiles(
                keyVar
                    + " ("
                    + file
                    + ") is encrypted; the node reads an unencrypted PKCS#8 key (keep it readable"
                    + " by the node only). Decrypt it: openssl pkcs8 -in "
                    + file
                    + " -out key.pkcs8.pem");
        default -> {
          // a certificate in the key file is looked at below
        }
      }
    }
    if (pkcs8 == null)
      throw new UnusableFiles(
          keyVar
              + " ("
              + file
              + ") holds no \"BEGIN PRIVATE KEY\" block"
              + (blocks.stream().anyMatch(b -> b.label().equals("CERTIFICATE"))
                  ? " but a certificate: are " + certVar + " and " + keyVar + " swapped?"
                  : ""));
    List<String> types = new ArrayList<>();
    types.add(certificateKeyType.equals("EdDSA") ? "Ed25519" : certificateKeyType);
    KEY_TYPES.stream().filter(t -> !types.contains(t)).forEach(types::add);
    byte[] der = pkcs8.der();
    try {
      for (String type : types) {
        try {
          return KeyFactory.getInstance(type).generatePrivate(new PKCS8EncodedKeySpec(der));
        } catch (GeneralSecurityException notThisType) {
          // the next type
        }
      }
    } finally {
      Arrays.fill(der, (byte) 0);
    }
    throw new UnusableFiles(
        keyVar + " (" + file + ") is not a PKCS#8 RSA, EC or EdDSA private key the JDK can read");
  }

  /** Whether {@code key} signs what {@code publicKey} verifies. */
  private static boolean belongsTo(PrivateKey key, PublicKey publicKey) {
    String algorithm =
        switch (key.getAlgorithm()) {
          case "RSA" -> "SHA256withRSA";
          case "EC" -> "SHA256withECDSA";
          case "Ed25519", "EdDSA" -> "Ed25519";
          case "Ed448" -> "Ed448";
          default -> null;
        };
    if (algorithm == null) return false;
    try {
      byte[] probe = "tickmark tls key check".getBytes(StandardCharsets.US_ASCII);
      Signature signer = Signature.getInstance(algorithm);
      signer.initSign(key);
      signer.update(probe);
      byte[] signature = signer.sign();
      Signature verifier = Signature.getInstance(algorithm);
      verifier.initVerify(publicKey);
      verifier.update(probe);
      return verifier.verify(signature);
    } catch (GeneralSecurityException e) {
      return false; // e.g. an RSA key against an EC certificate
    }
  }
}
