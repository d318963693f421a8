package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.HardwareReport;
import java.util.List;

/**
 * Where the agent's facts come from: the real machine ({@link HardwareProbe}) or simulated GPUs
 * ({@link SimulatedHardware}).
 */
interface Hardware {

  /**
   * Measures the machine now (blocking: runs the vendor tools and a short disk write). Never throws
   * for missing tools.
   */
  HardwareReport report();

  /**
   * Utilisation and temperature of each reported GPU, for a heartbeat (blocking, short); a {@code
   * fault} only when observed.
   */
  List<AgentFrame.GpuSample> sample();
}
