package io.github.verbs4j;

/**
 * A work request completed with an error status. Built by {@link Completion#error()} so a
 * failed completion can be thrown where the application wants an exception.
 */
public class WorkCompletionException extends RdmaException {

    private static final long serialVersionUID = 1L;

    private final WcStatus status;
    private final long wrId;
    private final int vendorError;
    private final int qpNumber;
    private final WcOpcode opcode;

    /**
     * A failed completion, named by its work request id.
     *
     * @param status      the completion status
     * @param wrId        the work request's id
     * @param vendorError the device-specific error code
     * @param qpNumber    the local QP number
     * @param opcode      the opcode, {@link WcOpcode#UNKNOWN} when undefined
     */
    public WorkCompletionException(WcStatus status, long wrId, int vendorError, int qpNumber, WcOpcode opcode) {
        this("work request " + wrId, status, wrId, vendorError, qpNumber, opcode);
    }

    /**
     * A failed completion, named in the caller's words (for example {@code "RDMA READ #3 on
     * RdmaConnection[...]"}) where its work request id is internal and would mean nothing.
     *
     * @param workRequest what the work request was, leading the message
     * @param status      the completion status
     * @param wrId        the work request's id
     * @param vendorError the device-specific error code
     * @param qpNumber    the local QP number
     * @param opcode      the opcode, {@link WcOpcode#UNKNOWN} when undefined
     */
    public WorkCompletionException(String workRequest, WcStatus status, long wrId, int vendorError, int qpNumber,
            WcOpcode opcode) {
        super(workRequest + " on QP 0x" + Integer.toHexString(qpNumber) + " completed with " + status
                + " (" + status.cName() + ", vendor error 0x" + Integer.toHexString(vendorError) + ")"
                + (opcode == WcOpcode.UNKNOWN ? "" : ", opcode " + opcode));
        this.status = status;
        this.wrId = wrId;
        this.vendorError = vendorError;
        this.qpNumber = qpNumber;
        this.opcode = opcode;
    }

    /** The completion status. */
    public WcStatus status() {
        return status;
    }

    /** The work request's id. */
    public long wrId() {
        return wrId;
    }

    /** The device-specific error code ({@code vendor_err}). */
    public int vendorError() {
        return vendorError;
    }

    /** The local QP number. */
    public int qpNumber() {
        return qpNumber;
    }

    /** The opcode (often {@link WcOpcode#UNKNOWN}: it is undefined for error completions). */
    public WcOpcode opcode() {
        return opcode;
    }
}
