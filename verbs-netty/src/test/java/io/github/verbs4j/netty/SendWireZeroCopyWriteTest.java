package io.github.verbs4j.netty;

/**
 * {@link RdmaZeroCopyWriteTest}'s tests on the SEND wire, forced on both sides: on softrdma, a RoCE device,
 * the default is WRITE_WITH_IMM, and iWARP devices use SEND.
 */
@RdmaLoops.WireMode(RdmaWireMode.SEND)
class SendWireZeroCopyWriteTest extends RdmaZeroCopyWriteTest {
}
