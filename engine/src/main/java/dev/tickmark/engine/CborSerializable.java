package dev.tickmark.engine;

/**
 * Marker for every message, event and snapshot that crosses a node boundary or reaches the journal.
 * Bound to Pekko's {@code jackson-cbor} serializer in {@code serialization.conf}; Java
 * serialization is switched off, so a type that forgets this marker fails loudly, not silently.
 */
public interface CborSerializable {}
