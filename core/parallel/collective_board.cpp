#include "collective_board.h"

#include <cstdio>

namespace shardscope {
namespace {

thread_local const CollectiveSite* currentSite = nullptr;

std::string seconds(std::chrono::steady_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

CollectiveSite::CollectiveSite(const std::string& where, int64_t step)
    : where_(&where), step_(step), outer_(currentSite) {
  currentSite = this;
}

CollectiveSite::~CollectiveSite() {
  currentSite = outer_;
}

std::string CollectiveSite::current() {
  if (!currentSite) return {};
  std::string s = *currentSite->where_;
  if (currentSite->step_ >= 0) s += " at step " + std::to_string(currentSite->step_);
  return s;
}

CollectiveBoard::CollectiveBoard(int size) : rows_(size_t(size)) {}

void CollectiveBoard::enter(int rank, const char* op, bool again) {
  std::string site = again ? std::string() : CollectiveSite::current();
  std::lock_guard lock(mutex_);
  Row& r = rows_.at(size_t(rank));
  if (!again || !r.op) {
    r.op = op;
    r.site = std::move(site);
    ++r.count;
  }
  r.waiting = true;
  r.since = Clock::now();
}

void CollectiveBoard::leave(int rank) {
  std::lock_guard lock(mutex_);
  Row& r = rows_.at(size_t(rank));
  r.waiting = false;
  r.since = Clock::now();
}

void CollectiveBoard::clear() {
  std::lock_guard lock(mutex_);
  for (Row& r : rows_) r = Row{};
}

std::string CollectiveBoard::label(const Row& r) {
  std::string s = std::string(r.op) + " #" + std::to_string(r.count);
  if (!r.site.empty()) s += " (" + r.site + ")";
  return s;
}

std::string CollectiveBoard::collectiveOf(int rank) const {
  std::lock_guard lock(mutex_);
  const Row& r = rows_.at(size_t(rank));
  return r.op ? label(r) : std::string("no collective yet");
}

std::string CollectiveBoard::describe() const {
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  std::string s;
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    s += "\n  rank " + std::to_string(i) + ": ";
    if (!r.op) {
      s += "has made no collective in this job (busy in its own work, or stuck before its first)";
    } else if (r.waiting) {
      s += "waiting in " + label(r) + " for " + seconds(now - r.since);
    } else {
      s += "not in a collective: busy in its own work for " + seconds(now - r.since) + " since " +
           label(r) + " completed";
    }
  }
  return s;
}

}  // namespace shardscope
