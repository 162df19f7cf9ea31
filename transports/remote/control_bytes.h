// The control bytes every connection that sets up over a control socket understands after the
// setup message (control_connection.h). Pure constants, so that the wire checks and the fuzzers
// (tests/fuzz) use them without the connection.
#pragma once

namespace weft::remote {

// The sender gave the connection up: the receiver fails its operations on it.
inline constexpr char kPoisoned = 'P';
// The sender closes the connection (by its destructor): the socket's end that follows is no
// failure. Followed by a count of messages where the transport says so.
inline constexpr char kGoodbye = 'B';

}  // namespace weft::remote
