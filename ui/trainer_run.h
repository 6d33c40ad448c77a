// The run of the predictor trainer a wizard page started, told apart from the
// runs it left behind. Back cancels a page's run, but the trainer still reports
// that run's end (finished or failed) later, perhaps after the page has started
// again: that report must not end the page's new run. The trainer runs one job
// at a time, in order, so counting the runs left behind is enough.
#pragma once

namespace moe {

class TrainerRun {
 public:
  bool running() const { return running_; }
  // Progress worth showing: the current run's, none of a run left behind.
  bool showsProgress() const { return running_ && left_behind_ == 0; }

  // A new run starts; false while one runs.
  bool start() {
    if (running_) return false;
    running_ = true;
    return true;
  }
  // The page is left while its run goes on (it was asked to cancel); false when none runs.
  bool leave() {
    if (!running_) return false;
    running_ = false;
    ++left_behind_;
    return true;
  }
  // The trainer reported the end of a run: true when it is the current run's,
  // which is then over; false for a run left behind, or when none runs.
  bool end() {
    if (left_behind_ > 0) {
      --left_behind_;
      return false;
    }
    if (!running_) return false;
    running_ = false;
    return true;
  }

 private:
  bool running_ = false;
  int left_behind_ = 0;  // runs left by Back whose end is still to be reported
};

}  // namespace moe
