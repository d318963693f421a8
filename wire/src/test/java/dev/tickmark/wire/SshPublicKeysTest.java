package dev.tickmark.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SshPublicKeysTest {
  /**
   * Made with {@code ssh-keygen -t ed25519 -C alice@laptop}; {@code ssh-keygen -l} printed the
   * fingerprint.
   */
  static final String ED25519 =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIF9LgIq3tZpQwvSXaZHpB+boQt5b1pTNa7dB6P2eqXp alice@laptop";

  static final String ED25519_FINGERPRINT = "SHA256:SxqerIzs4RQjwl91JQcNSCUg0hdyfeHZ+RdZLt5r7MA";

  static final String RSA =
      "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCmsYh/QyPpkcXpOjrD5wxQS4dyhtpIE/+BPv3hJRUEtiVok0xzXfJAAnaw5cJq18IDYsL4ow9ITWlOq+orfnlsovisv3D1/Zj2Am5gt5vN8IVTtQDF+RNrLR7cKnd5/6G4HSpxe5XUepgEkCMon8UQ/t09buw6fkZDYDY7zu5j86g47avhrN+yPPvJ9vznfTF0PlHdqPbWQZwwDa3LMGlNiRQGi145EWAgOBIHahT1Ehfsg1w9TlckgvzH3MzAvwh0XaJbcwljLVoy9hUQT/413buMNg1RZGqbO+COcyv9iUkDajdVL3QpZYoAF7N2k8GQOGcRzInNKlrNJuwFF+Yn ";

  static final String RSA_FINGERPRINT = "SHA256:Z6Dqc+q5lbbEjy+iu2YnxrppQ3h7qI6sMgyEoKrJn4M";

  @Test
  void readsKeysAsOpenSshWritesThemWithOpenSshsFingerprints() {
    SshPublicKeys.Key ed = SshPublicKeys.parse(ED25519).orElseThrow();
    assertEquals("ssh-ed25519", ed.type());
    assertEquals("alice@laptop", ed.comment());
    assertEquals(ED25519_FINGERPRINT, ed.fingerprint());
    assertEquals(ED25519, ed.withoutComment() + " alice@laptop");
    SshPublicKeys.Key rsa = SshPublicKeys.parse(RSA).orElseThrow();
    assertEquals(RSA_FINGERPRINT, rsa.fingerprint());
    assertEquals("", rsa.comment());
  }

  @Test
  void refusesWhatIsNotAPublicKeyLine() {
    assertFalse(SshPublicKeys.isPublicKeyLine(null));
    assertFalse(SshPublicKeys.isPublicKeyLine(""));
    assertFalse(SshPublicKeys.isPublicKeyLine("ssh-ed25519"));
    assertFalse(
        SshPublicKeys.isPublicKeyLine("ssh-ed25519 AAAA"), "a blob too short to name its type");
    assertFalse(SshPublicKeys.isPublicKeyLine("ssh-ed25519 !!!notbase64"));
    assertFalse(
        SshPublicKeys.isPublicKeyLine("ssh-dss " + ED25519.split(" ")[1]), "an unknown type");
    assertFalse(
        SshPublicKeys.isPublicKeyLine("ssh-rsa " + ED25519.split(" ")[1]),
        "a key pasted under another type than its blob names");
    assertFalse(SshPublicKeys.isPublicKeyLine(ED25519 + "\u0007"), "control characters");
    assertFalse(SshPublicKeys.isPublicKeyLine("-----BEGIN OPENSSH PRIVATE KEY-----"));
  }

  @Test
  void readsAnAuthorizedKeysTextAndNamesTheFirstBadLine() {
    assertEquals(2, SshPublicKeys.parseAll("# mine\n" + ED25519 + "\n\n" + RSA + "\n").size());
    IllegalArgumentException bad =
        assertThrows(
            IllegalArgumentException.class,
            () -> SshPublicKeys.parseAll(ED25519 + "\nnot a key\n"));
    assertTrue(bad.getMessage().contains("line 2"), bad.getMessage());
  }
}
