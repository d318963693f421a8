package dev.tickmark.engine.account;

import java.util.AbstractMap;
import java.util.Iterator;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.HashMap;
import scala.collection.immutable.HashMap$;

/**
 * An immutable {@code Map<String, V>} whose {@link #with} and {@link #without} share structure with
 * the map they come from (a hash array mapped trie, Scala's immutable {@code HashMap}, already on
 * the classpath with Pekko), so each costs O(log n) rather than a copy of the whole map.
 *
 * <p>Why: an account's state keeps a high-water mark per rental it was ever charged or credited
 * for. A provider with thousands of rentals running was copying maps of that size twice on every
 * settlement event, and its entity fell behind its rentals (docs/benchmarks-market.md §3d). Jackson
 * writes it as a plain JSON/CBOR map, so snapshots keep their format.
 */
final class PersistentMap<V> extends AbstractMap<String, V> {
  private static final PersistentMap<Object> EMPTY =
      new PersistentMap<>(HashMap$.MODULE$.<String, Object>empty());

  private final HashMap<String, V> trie;
  private Set<Entry<String, V>> entries;

  private PersistentMap(HashMap<String, V> trie) {
    this.trie = trie;
  }

  @SuppressWarnings("unchecked")
  static <V> PersistentMap<V> empty() {
    return (PersistentMap<V>) EMPTY;
  }

  /** {@code map} itself when it already is one, else a copy. */
  static <V> PersistentMap<V> of(Map<String, V> map) {
    if (map instanceof PersistentMap<V> persistent) return persistent;
    PersistentMap<V> result = empty();
    for (Entry<String, V> e : map.entrySet()) result = result.with(e.getKey(), e.getValue());
    return result;
  }

  PersistentMap<V> with(String key, V value) {
    return new PersistentMap<>(trie.updated(key, value));
  }

  PersistentMap<V> without(String key) {
    return trie.contains(key) ? new PersistentMap<>(trie.removed(key)) : this;
  }

  @Override
  public V get(Object key) {
    if (!(key instanceof String k)) return null;
    Option<V> found = trie.get(k);
    return found.isDefined() ? found.get() : null;
  }

  @Override
  public boolean containsKey(Object key) {
    return key instanceof String k && trie.contains(k);
  }

  @Override
  public int size() {
    return trie.size();
  }

  @Override
  public boolean isEmpty() {
    return trie.isEmpty();
  }

  @Override
  public Set<Entry<String, V>> entrySet() {
    if (entries == null) {
      entries =
          new java.util.AbstractSet<>() {
            @Override
            public Iterator<Entry<String, V>> iterator() {
              scala.collection.Iterator<Tuple2<String, V>> it = trie.iterator();
              return new Iterator<>() {
                @Override
                public boolean hasNext() {
                  return it.hasNext();
                }

                @Override
                public Entry<String, V> next() {
                  if (!it.hasNext()) throw new NoSuchElementException();
                  Tuple2<String, V> t = it.next();
                  return new SimpleImmutableEntry<>(t._1(), t._2());
                }
              };
            }

            @Override
            public int size() {
              return trie.size();
            }
          };
    }
    return entries;
  }
}
