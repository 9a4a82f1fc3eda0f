// The runtime's messages and the runtime's own writes, made safe for the program around them.
//
// The runtime shares the process with a program that owns its descriptors and signal dispositions.
// A message must never raise a signal in the program (SIGPIPE when stderr is a dead pipe), never
// land in a descriptor the program reused (fd 2 closed, then reopened on a data file), and never
// block the program (stderr a full pipe). So "stderr", for the runtime, is the file that fd 2 was
// when the runtime started: a message goes to fd 2 only while fd 2 is still that file and is ready
// to take it, with SIGPIPE held off. With the option log=PATH messages go to that file instead.
#ifndef HCCT_RT_MESSAGES_H
#define HCCT_RT_MESSAGES_H

#include <signal.h>

#include "common.h"

namespace hcct::rt {

// Remembers which file fd 2 is. Called first thing by the runtime's constructor (and by tests).
void messages_init();
// Sends later messages to `path` (appended, created 0644) instead of stderr; null: back to stderr.
void messages_to_file(const char *path);

// One message (a line, or several): written whole or not at all, never raising a signal.
void say_text(const char *text, size_t size);
__attribute__((format(printf, 1, 2))) void say(const char *format, ...);
// The text of an errno value for a message, untranslated: strerror goes through gettext, which may
// allocate and take locks (messages are said from dumps in signal handlers and at _exit).
const char *error_text(int err);

// While an instance lives, SIGPIPE and SIGXFSZ caused by the calling thread's writes are held off
// and then discarded: a dump into a full or size-limited file system reports an error instead of
// killing the program (the program's own writes before and after behave as they always did).
// Async-signal-safe.
class QuietWrites {
 public:
  QuietWrites();
  ~QuietWrites();
  QuietWrites(const QuietWrites &) = delete;
  QuietWrites &operator=(const QuietWrites &) = delete;

 private:
  sigset_t old_mask_;
  sigset_t pending_before_;
};

}  // namespace hcct::rt

#endif
