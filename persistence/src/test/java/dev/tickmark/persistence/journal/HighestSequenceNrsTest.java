package dev.tickmark.persistence.journal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/**
 * A highest sequence number read with a snapshot is used once, and never when a write of the
 * journal may have moved it since its read began.
 */
class HighestSequenceNrsTest {
  private final HighestSequenceNrs numbers = new HighestSequenceNrs();

  @Test
  void aNumberReadIsTakenOnceAndThenAskedForAgain() {
    HighestSequenceNrs.Entry token = numbers.begin("a");
    assertNotNull(token);
    assertNull(numbers.take("a"), "a read still running leaves nothing to take");
    token = numbers.begin("a");
    numbers.complete("a", token, 7);
    assertEquals(7L, numbers.take("a"));
    assertNull(numbers.take("a"), "taken once: the next recovery reads again");
    assertNull(numbers.take("b"), "nothing was read for another entity");
    assertEquals(1, numbers.taken());
    assertEquals(0, numbers.leftCount());
  }

  @Test
  void aWriteInFlightWhenTheReadBeginsMeansNoNumberIsLeft() {
    numbers.writeQueued("a");
    assertNull(numbers.begin("a"), "the read may not see the write in flight");
    assertEquals(1, numbers.declined());
    numbers.writeDone("a");
    HighestSequenceNrs.Entry token = numbers.begin("a");
    assertNotNull(token, "with the write done, the read sees it");
    numbers.complete("a", token, 3);
    assertEquals(3L, numbers.take("a"));
  }

  @Test
  void aWriteQueuedWhileTheReadRunsDiscardsTheNumber() {
    HighestSequenceNrs.Entry token = numbers.begin("a");
    numbers.writeQueued("a");
    numbers.writeDone("a");
    numbers.complete("a", token, 5);
    assertNull(numbers.take("a"), "the write came after the read began: 5 may be behind");
  }

  @Test
  void aWriteQueuedAfterTheReadDiscardsTheNumber() {
    HighestSequenceNrs.Entry token = numbers.begin("a");
    numbers.complete("a", token, 5);
    numbers.writeQueued("a");
    numbers.writeDone("a");
    assertNull(numbers.take("a"));
  }

  @Test
  void aNumberIsNotTakenWhileAWriteIsInFlight() {
    HighestSequenceNrs.Entry token = numbers.begin("a");
    numbers.complete("a", token, 5);
    numbers.writeQueued("b"); // another entity's write changes nothing for "a"
    numbers.writeQueued("a");
    assertNull(numbers.take("a"));
    token = numbers.begin("b");
    assertNull(token, "b's write is still in flight");
    numbers.writeDone("b");
    numbers.writeDone("a");
    token = numbers.begin("a");
    numbers.complete("a", token, 6);
    assertEquals(6L, numbers.take("a"));
  }

  @Test
  void twoWritesInFlightAreBothWaitedFor() {
    numbers.writeQueued("a");
    numbers.writeQueued("a");
    numbers.writeDone("a");
    assertNull(numbers.begin("a"), "one of the two writes is still in flight");
    numbers.writeDone("a");
    assertNotNull(numbers.begin("a"));
  }

  @Test
  void aFailedReadLeavesNothing() {
    HighestSequenceNrs.Entry token = numbers.begin("a");
    numbers.abandon("a", token);
    assertEquals(0, numbers.leftCount());
    numbers.complete("a", token, 4); // a late completion of the abandoned read
    assertNull(numbers.take("a"));
  }

  @Test
  void aNewerReadReplacesAnOlderOne() {
    HighestSequenceNrs.Entry first = numbers.begin("a");
    HighestSequenceNrs.Entry second = numbers.begin("a");
    numbers.complete("a", second, 9);
    numbers.complete("a", first, 8); // the older read finishing last does not win
    assertEquals(9L, numbers.take("a"));
  }

  @Test
  void beyondTheLimitNoMoreIsLeftUntilOneIsTaken() {
    for (int i = 0; i < HighestSequenceNrs.MAX_LEFT; i++) {
      HighestSequenceNrs.Entry token = numbers.begin("e" + i);
      numbers.complete("e" + i, token, i);
    }
    assertNull(numbers.begin("one-more"), "all recent: none is dropped to make room");
    assertEquals(HighestSequenceNrs.MAX_LEFT, numbers.leftCount());
    assertEquals(41L, numbers.take("e41"));
    assertNotNull(numbers.begin("one-more"), "a number taken made room");
  }
}
