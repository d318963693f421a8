package dev.tickmark.agent.ssh;

import com.sun.jna.LastErrorException;
import com.sun.jna.Library;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLong;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * A pseudo-terminal pair from {@code openpty(3)} (through JNA): the child gets the slave by its
 * path ({@link #slavePath()}), the agent reads and writes the master. Linux only (the {@code
 * TIOCSWINSZ} number is Linux's).
 *
 * <p>Reads poll with a timeout so that a reader can be told to stop without closing the fd under it
 * (a read blocked on a closed, reused fd would read someone else's data).
 */
final class Pty implements AutoCloseable {
  private static final long TIOCSWINSZ = 0x5414;
  private static final short POLLIN = 0x1;
  private static final int EINTR = 4;
  private static final int EAGAIN = 11;

  /** {@code openpty} is in libc since glibc 2.34, in libutil before. */
  interface Util extends Library {
    int openpty(
        IntByReference master, IntByReference slave, byte[] name, Pointer termp, Pointer winp)
        throws LastErrorException;
  }

  interface LibC extends Library {
    int ioctl(int fd, NativeLong request, Pointer arg) throws LastErrorException;

    NativeLong read(int fd, Pointer buf, NativeLong count) throws LastErrorException;

    NativeLong write(int fd, Pointer buf, NativeLong count) throws LastErrorException;

    int poll(Pointer fds, NativeLong nfds, int timeoutMs) throws LastErrorException;

    int close(int fd);
  }

  private static volatile LibC libc;
  private static volatile Util util;

  private final int master;
  private int slave;
  private final String slavePath;
  private boolean closed; // guarded by this

  private Pty(int master, int slave, String slavePath) {
    this.master = master;
    this.slave = slave;
    this.slavePath = slavePath;
  }

  /** Opens a new pair with the given window size. */
  static Pty open(int columns, int rows) throws IOException {
    IntByReference m = new IntByReference();
    IntByReference s = new IntByReference();
    byte[] name = new byte[4096]; // openpty writes the slave's name here (PATH_MAX is enough)
    try {
      if (util().openpty(m, s, name, null, winsize(columns, rows)) != 0)
        throw new IOException("openpty failed");
    } catch (LastErrorException | UnsatisfiedLinkError e) {
      throw new IOException("cannot open a pseudo-terminal: " + e.getMessage(), e);
    }
    int len = 0;
    while (len < name.length && name[len] != 0) len++;
    return new Pty(m.getValue(), s.getValue(), new String(name, 0, len, StandardCharsets.UTF_8));
  }

  /** The slave's path ({@code /dev/pts/N}), for the child's stdin, stdout and stderr. */
  String slavePath() {
    return slavePath;
  }

  /**
   * Closes the agent's own slave fd, once the child has opened the slave: afterwards the master
   * reads end (EIO) when the last process holding the terminal has gone.
   */
  synchronized void closeSlave() {
    if (slave >= 0) {
      libc().close(slave);
      slave = -1;
    }
  }

  /** Sets the window size ({@code TIOCSWINSZ}); the foreground process gets SIGWINCH. */
  synchronized void resize(int columns, int rows) {
    if (closed) return;
    try {
      libc().ioctl(master, new NativeLong(TIOCSWINSZ), winsize(columns, rows));
    } catch (LastErrorException e) {
      // the terminal is going away
    }
  }

  /**
   * Reads what the child wrote into {@code buf}: the byte count, 0 when nothing came within {@code
   * timeoutMs}, -1 at the end (every process holding the slave has closed it, or closed here).
   */
  int read(Memory buf, int timeoutMs) {
    Memory pfd = new Memory(8); // struct pollfd { int fd; short events; short revents; }
    pfd.setInt(0, master);
    pfd.setShort(4, POLLIN);
    pfd.setShort(6, (short) 0);
    synchronized (this) {
      if (closed) return -1;
    }
    try {
      int ready = libc().poll(pfd, new NativeLong(1), timeoutMs);
      if (ready == 0) return 0;
      synchronized (this) {
        if (closed) return -1;
      }
      long n = libc().read(master, buf, new NativeLong(buf.size())).longValue();
      return n <= 0 ? -1 : (int) n;
    } catch (LastErrorException e) {
      if (e.getErrorCode() == EINTR || e.getErrorCode() == EAGAIN) return 0;
      return -1; // EIO: the slave side is closed
    }
  }

  /** Writes all of {@code data[0, len)} to the terminal (the child's input). */
  void write(byte[] data, int len) throws IOException {
    Memory buf = new Memory(Math.max(1, len));
    buf.write(0, data, 0, len);
    long off = 0;
    while (off < len) {
      synchronized (this) {
        if (closed) throw new IOException("the terminal is closed");
      }
      try {
        long n = libc().write(master, buf.share(off), new NativeLong(len - off)).longValue();
        if (n <= 0) throw new IOException("cannot write to the terminal");
        off += n;
      } catch (LastErrorException e) {
        if (e.getErrorCode() == EINTR || e.getErrorCode() == EAGAIN) continue;
        throw new IOException("cannot write to the terminal: " + e.getMessage(), e);
      }
    }
  }

  /**
   * Closes both ends; the processes still on the terminal get SIGHUP. Call once no thread reads or
   * writes any more (reads and writes after it fail).
   */
  @Override
  public synchronized void close() {
    if (closed) return;
    closed = true;
    closeSlave();
    libc().close(master);
  }

  private static Memory winsize(int columns, int rows) {
    Memory ws = new Memory(8); // struct winsize { ushort row, col, xpixel, ypixel; }
    ws.setShort(0, (short) clamp(rows, 24));
    ws.setShort(2, (short) clamp(columns, 80));
    ws.setShort(4, (short) 0);
    ws.setShort(6, (short) 0);
    return ws;
  }

  private static int clamp(int value, int otherwise) {
    return value > 0 && value < 65536 ? value : otherwise;
  }

  private static LibC libc() {
    if (libc == null) libc = Native.load("c", LibC.class);
    return libc;
  }

  private static Util util() {
    if (util == null) {
      Util u;
      try {
        u = Native.load("c", Util.class);
        com.sun.jna.NativeLibrary.getInstance("c").getFunction("openpty");
      } catch (UnsatisfiedLinkError e) {
        u = Native.load("util", Util.class);
      }
      util = u;
    }
    return util;
  }
}
