"""The CrosstalkError tree.

Every failure a user can meet is one of these: a stable machine-readable ``code`` (listed in
CLI.md, never renamed) and one plain sentence saying what happened and what to do. The CLI turns
them into ``{"error": {"code", "message"}}`` and exit status 1; the control socket sends them as
``{"ok": false, "error": {...}}``; the MCP server as an ``isError`` result.

Standard library only: the hook program imports this module.
"""

from __future__ import annotations


class CrosstalkError(Exception):
    """Something went wrong that we can explain in one sentence.

    Subclasses fix ``code``; the message is written for the person who will read it.
    """

    code: str = "internal"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_dict(self) -> dict[str, str]:
        """The ``{"code", "message"}`` pair used by every output channel."""
        return {"code": self.code, "message": self.message}


class LocalProtocolError(CrosstalkError):
    """We used a protocol wrongly (a bug on our side, or a call made in the wrong state)."""

    code = "protocol_error"


class RemoteProtocolError(CrosstalkError):
    """The other side broke the protocol. ``hint`` may name the error code to send back."""

    code = "protocol_error"

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, code=code)
        self.hint = hint


class NotSetUp(CrosstalkError):
    """There is no identity yet: pair with someone first (``crosstalk room new``)."""

    code = "not_set_up"


class DamagedState(CrosstalkError):
    """A state file does not parse. We never overwrite it; the user must look at it."""

    code = "damaged_state"


class DaemonUnreachable(CrosstalkError):
    """The daemon did not answer on its control socket in time."""

    code = "daemon_unreachable"


class DaemonStarting(CrosstalkError):
    """The daemon did not finish starting in time to run this request; try it again shortly
    (``daemon.log`` says what it is doing)."""

    code = "daemon_starting"


class AlreadySetUp(CrosstalkError):
    """This home already has an identity; what was asked only works on a home without one."""

    code = "already_set_up"


class Unavailable(CrosstalkError):
    """Something this needs is not available here (a program not installed, a service that did
    not start); the sentence says what, and what to do instead."""

    code = "unavailable"


class NoLanAddress(CrosstalkError):
    """This machine has no network address others could reach; the sentence says how to set one."""

    code = "no_lan_address"


class NoKeyring(CrosstalkError):
    """There is no usable OS keyring on this machine."""

    code = "no_keyring"


class RelayInUse(CrosstalkError):
    """This identity cannot move to another relay: its rooms live on the one it uses, or
    ``CROSSTALK_RELAY`` pins it."""

    code = "relay_in_use"


class CannotStart(CrosstalkError):
    """A command could not start what it runs, or write what it makes (a port in use, a
    directory it may not write); the sentence names the system's reason."""

    code = "cannot_start"


class RelayUnreachable(CrosstalkError):
    """The relay could not be reached."""

    code = "relay_unreachable"


class InvalidRequest(CrosstalkError):
    """A request was malformed: not JSON, not an object, missing or wrong fields."""

    code = "invalid_request"


class UnknownOp(CrosstalkError):
    """A control-socket request named an operation the daemon does not have."""

    code = "unknown_op"


class TooLarge(CrosstalkError):
    """Something was bigger than the limit that applies to it."""

    code = "too_large"


class RateLimited(CrosstalkError):
    """Too many requests in a short time; wait a little and try again."""

    code = "rate_limited"


class WrongWords(CrosstalkError):
    """The pairing words did not match. The slot is burned; start a new pairing."""

    code = "wrong_words"


class SlotExpired(CrosstalkError):
    """The pairing slot expired (15 minutes) before both sides met."""

    code = "slot_expired"


class SlotNotFound(CrosstalkError):
    """No pairing slot with that number exists (it was never made, or was used up)."""

    code = "slot_not_found"


class UnknownPeer(CrosstalkError):
    """No contact by that name."""

    code = "unknown_peer"


class UnknownSession(CrosstalkError):
    """The address names a session (or project) the person has not published: nobody there
    would read it. The message lists the sessions they have."""

    code = "unknown_session"


class UnknownRoom(CrosstalkError):
    """No room by that name or id."""

    code = "unknown_room"


class NotAMember(CrosstalkError):
    """The action needs membership of a room you are not in."""

    code = "not_a_member"


class DirectRoom(CrosstalkError):
    """A room of two cannot lose a member: it is the pairing itself."""

    code = "direct_room"


class NotInvited(CrosstalkError):
    """There is no invitation to accept or decline."""

    code = "not_invited"


class Refused(CrosstalkError):
    """The receiver's attention settings refused this."""

    code = "refused"


class NoAnswer(CrosstalkError):
    """Nobody answered before the timeout."""

    code = "no_answer"


class ClaimedByOther(CrosstalkError):
    """Somebody else holds that task."""

    code = "claimed_by_other"


class Reserved(CrosstalkError):
    """Someone else holds a reservation that overlaps the one asked for; the sentence names
    them, what they hold, until when and why."""

    code = "reserved"


class NotInRepository(CrosstalkError):
    """A command that names repository paths was run outside any git repository."""

    code = "not_in_repository"


class NeedsReason(CrosstalkError):
    """A self-initiated message must say why it matters to the recipient."""

    code = "needs_reason"


class RationSpent(CrosstalkError):
    """The hourly ration of self-initiated messages to this recipient is used up."""

    code = "ration_spent"


class InvalidConfig(CrosstalkError):
    """A configuration file could not be parsed or has the wrong shape; it was left untouched."""

    code = "invalid_config"


class UsageError(CrosstalkError):
    """The command was called wrongly (a malformed argument). The CLI exits 2 for these."""

    code = "usage"


class UnknownReservation(UsageError):
    """No reservation of yours with that id holds (released, lapsed, or never yours)."""

    code = "unknown_reservation"


class RelayKeyMismatch(CrosstalkError):
    """The relay showed a different key from the one pinned for its URL; we did not talk to it."""

    code = "relay_key_mismatch"


class StorageUnavailable(CrosstalkError):
    """The relay's storage service (NATS JetStream) did not answer in time or refused a write."""

    code = "storage_unavailable"


class NatsServerTooOld(StorageUnavailable):
    """A relay node found a nats-server too old for per-room compare-and-set; it does not start."""

    code = "nats_server_too_old"


class StorageFull(CrosstalkError):
    """The state directory's disk is full (or failing); nothing was stored or acknowledged."""

    code = "storage_full"


class InvalidSlice(CrosstalkError):
    """A ``--slice`` spec was refused before anything ran: an option where a revision or path goes,
    a revision that does not exist, or a path outside the project."""

    code = "invalid_slice"


class NotInProject(CrosstalkError):
    """A ``file:`` or ``diff:`` slice was asked for from a place that lies in no project one of
    this identity's agent sessions works in; slices come only from those projects."""

    code = "not_in_project"


class CredentialRefused(CrosstalkError):
    """A slice would have carried a credential (a key file, a token, a git config); it was not
    attached. The sentence says which file or pattern."""

    code = "credential_refused"


class UnknownMessage(CrosstalkError):
    """No message here has that id (or id prefix), or it is not what the command needs: ``answer``
    takes only a question someone asked you, ``--reply-to`` only a message this home has seen."""

    code = "unknown_message"


class UnknownTask(CrosstalkError):
    """No task in your rooms has that id (or id prefix), or the prefix names several: ``crosstalk
    tasks`` lists them with their ids."""

    code = "unknown_task"


class UnknownFact(CrosstalkError):
    """No fact in your rooms has that id (or id prefix), or the prefix names several: ``crosstalk
    facts`` lists them with their ids."""

    code = "unknown_fact"


class BadPassphrase(CrosstalkError):
    """The passphrase does not open this backup (or, for ``backup``, is empty or was not typed
    the same twice). Nothing was written."""

    code = "bad_passphrase"


class DamagedBackup(CrosstalkError):
    """The backup file is truncated, has been changed since it was written, is not a crosstalk
    backup, or was written by a newer crosstalk. Nothing was restored."""

    code = "damaged_backup"


class HomeInUse(CrosstalkError):
    """A daemon is running on the home a backup would be restored into. Nothing was written."""

    code = "home_in_use"
