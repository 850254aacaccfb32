package io.sowdb.client;

/**
 * A publish request was refused: nothing of it, and nothing sent after it, was stored (every
 * request carries {@code stop_on_error}). The requests acknowledged before are stored, and this
 * says how much that was, so that a caller can report it or resume after the bad message.
 */
public final class PublishException extends SowdbException {
  private final Integer messageIndex;
  private final PublishAck stored;

  PublishException(SowdbException base, Integer messageIndex, PublishAck stored) {
    super(base.code(), base.serverMessage(), base.fieldViolations(), base.reason(), base.metadata());
    this.messageIndex = messageIndex;
    this.stored = stored;
  }

  /** The index of the offending message in the whole publish call, or null when unknown. */
  public Integer messageIndex() {
    return messageIndex;
  }

  /** What the call stored before the refusal. */
  public PublishAck stored() {
    return stored;
  }
}
