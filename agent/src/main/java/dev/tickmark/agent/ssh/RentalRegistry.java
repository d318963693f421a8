package dev.tickmark.agent.ssh;

import java.io.IOException;
import java.io.StringReader;
import java.security.GeneralSecurityException;
import java.security.PublicKey;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.apache.sshd.common.config.keys.AuthorizedKeyEntry;
import org.apache.sshd.common.config.keys.PublicKeyEntryResolver;
import org.apache.sshd.common.session.Session;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the SSH server knows of the rentals, thread-safe: the running ones (their authorized keys
 * and {@link Workspace}), which loopback client port belongs to which rental (set by a stream
 * before it sends a byte), and the SSH sessions of each rental, closed when it ends.
 */
public final class RentalRegistry {
  private static final Logger log = LoggerFactory.getLogger(RentalRegistry.class);

  /** A running rental: who may log in, and where sessions run. */
  record Entry(String rentalId, List<PublicKey> keys, Workspace workspace) {}

  private final Map<String, Entry> running = new ConcurrentHashMap<>();
  private final Map<Integer, String> ports = new ConcurrentHashMap<>();
  private final Map<String, Set<Session>> sessions = new ConcurrentHashMap<>();
  private final List<Consumer<String>> endListeners = new CopyOnWriteArrayList<>();

  /**
   * A rental runs: {@code authorizedKeys} is authorized_keys text (one OpenSSH public key a line;
   * blank lines, comments and keys that cannot be read are skipped), null or empty for none.
   */
  public void running(String rentalId, String authorizedKeys, Workspace workspace) {
    running.put(rentalId, new Entry(rentalId, parseKeys(rentalId, authorizedKeys), workspace));
  }

  /**
   * A rental ends (stopping, stopped, failed): no more logins, and its sessions and streams close
   * (their processes are ended). Safe to call more than once.
   */
  public void ended(String rentalId) {
    running.remove(rentalId);
    Set<Session> open = sessions.remove(rentalId);
    if (open != null) {
      for (Session s : open) s.close(true);
      if (!open.isEmpty())
        log.info("rental {}: closed {} ssh session(s): it ended", rentalId, open.size());
    }
    for (Consumer<String> l : endListeners) l.accept(rentalId);
  }

  public boolean isRunning(String rentalId) {
    return rentalId != null && running.containsKey(rentalId);
  }

  /** Called with the rental's id each time one ends. */
  void onEnded(Consumer<String> listener) {
    endListeners.add(listener);
  }

  Optional<Entry> get(String rentalId) {
    return rentalId == null ? Optional.empty() : Optional.ofNullable(running.get(rentalId));
  }

  /** A stream's loopback socket (bound, not yet connected) from {@code port} is for the rental. */
  void bindPort(int port, String rentalId) {
    ports.put(port, rentalId);
  }

  void unbindPort(int port) {
    ports.remove(port);
  }

  String rentalOfPort(int port) {
    return ports.get(port);
  }

  /** Records a session of a rental; false (not recorded) when the rental does not run any more. */
  boolean addSession(String rentalId, Session session) {
    Set<Session> set = sessions.computeIfAbsent(rentalId, k -> ConcurrentHashMap.newKeySet());
    set.add(session);
    if (!running.containsKey(rentalId)) { // it ended meanwhile
      set.remove(session);
      return false;
    }
    return true;
  }

  void removeSession(String rentalId, Session session) {
    Set<Session> set = sessions.get(rentalId);
    if (set != null) set.remove(session);
  }

  int sessionCount(String rentalId) {
    Set<Session> set = sessions.get(rentalId);
    return set == null ? 0 : set.size();
  }

  private static List<PublicKey> parseKeys(String rentalId, String text) {
    List<PublicKey> keys = new ArrayList<>();
    if (text == null || text.isBlank()) return keys;
    int skipped = 0;
    for (String line : text.split("\\R")) {
      String l = line.strip();
      if (l.isEmpty() || l.startsWith("#")) continue;
      try {
        List<AuthorizedKeyEntry> entries =
            AuthorizedKeyEntry.readAuthorizedKeys(new StringReader(l), true);
        for (AuthorizedKeyEntry e : entries) {
          PublicKey k = e.resolvePublicKey(null, PublicKeyEntryResolver.IGNORING);
          if (k != null) keys.add(k);
          else skipped++;
        }
      } catch (IOException | GeneralSecurityException | RuntimeException e) {
        skipped++;
      }
    }
    if (skipped > 0)
      log.warn(
          "rental {}: {} ssh key line(s) could not be read and are ignored", rentalId, skipped);
    return List.copyOf(keys);
  }
}
