// Windows' winnt.h (pulled in by gRPC's platform header) defines DELETE as a
// macro, which would replace the DELETE values of the generated enums
// (v1 BatchOp.Op and Event.EventType, internal Command.Op) in the generated
// headers and in raftkv's code that names them. protobuf's own guard
// (port_def.inc) applies to MSVC only, and only inside generated headers.
// So the proto headers include this first: windows.h comes in once, here,
// and the macro goes; winnt.h's include guard keeps it from coming back.
// Nothing in raftkv uses the DELETE access right by that name. A no-op off
// Windows.
#pragma once

#ifdef _WIN32
#include <grpc/support/port_platform.h>
#undef DELETE
#endif
