package dev.tickmark.agent.ssh;

import java.io.IOException;
import java.util.Map;
import org.apache.sshd.common.channel.Channel;
import org.apache.sshd.common.channel.ChannelFactory;
import org.apache.sshd.common.channel.PtyMode;
import org.apache.sshd.common.channel.RequestHandler;
import org.apache.sshd.common.session.Session;
import org.apache.sshd.server.channel.ChannelSession;

/**
 * A {@code session} channel that remembers whether the client asked for a pseudo-terminal (so that
 * the shell or command gets one) and refuses agent and X11 forwarding outright.
 */
final class WorkloadChannel extends ChannelSession {
  private volatile boolean pty;

  boolean ptyRequested() {
    return pty;
  }

  @Override
  protected RequestHandler.Result handlePtyReqParsed(
      String term, int columns, int rows, int width, int height, Map<PtyMode, Integer> modes)
      throws IOException {
    pty = true;
    return super.handlePtyReqParsed(term, columns, rows, width, height, modes);
  }

  @Override
  protected RequestHandler.Result handleAgentForwardingParsed(String requestType) {
    return RequestHandler.Result.ReplyFailure;
  }

  static final class Factory implements ChannelFactory {
    @Override
    public String getName() {
      return "session";
    }

    @Override
    public Channel createChannel(Session session) {
      return new WorkloadChannel();
    }
  }
}
