// For callbacks that may outlive the object that started them: a proposal's
// `done` runs when the entry is applied or times out, which can be after
// the component that proposed it has stopped and been destroyed.
//
//   Lifeline lifeline_;                     // a member of the owner
//   node_->Propose(..., [this, line = lifeline_.line()](Outcome out) {
//     line.Run([&] { ...this... });         // skipped once the owner closed it
//   });
//   void Owner::Stop() { ...; lifeline_.Close(); }
//
// After Close() returns no callback is inside Run() and none will enter
// its function. Run() holds the lifeline's lock while its function runs, so
// the owner must not call Close() with a lock that function takes.
#pragma once

#include <memory>
#include <utility>

#include "common/mutex.h"

namespace raftkv {

class Lifeline {
  struct State {
    Mutex mu;
    bool open GUARDED_BY(mu) = true;
  };

 public:
  // What a callback carries.
  class Line {
   public:
    // Runs fn() unless the lifeline has been closed.
    template <typename F>
    void Run(F&& fn) const {
      MutexLock lock(&state_->mu);
      if (state_->open) std::forward<F>(fn)();
    }

   private:
    friend class Lifeline;
    explicit Line(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
  };

  Lifeline() = default;
  ~Lifeline() { Close(); }
  Lifeline(const Lifeline&) = delete;
  Lifeline& operator=(const Lifeline&) = delete;

  Line line() const { return Line(state_); }
  // Waits for a callback inside Run() and turns every later Run() into
  // nothing.
  void Close() {
    MutexLock lock(&state_->mu);
    state_->open = false;
  }

 private:
  const std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace raftkv
