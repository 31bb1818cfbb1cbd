#include "kareus/runtime/deadline.h"

#include <limits>

#include <gtest/gtest.h>

#include "kareus/common/error.h"

namespace kareus::runtime {
namespace {

TEST(Deadline, LeastEnergyMeetingTheDeadlineElseFastestFlagged) {
  // Not sorted, with a dominated point (2.0 s, 950 J) and an energy tie at 700 J.
  const std::vector<FrontierPoint> frontier = {
      {2.0, 950, "b"}, {1.0, 1000, "a"}, {3.0, 700, "d"}, {2.5, 700, "c"}, {4.0, 600, "e"}};
  struct Row {
    double deadline_s;
    std::size_t index;
    bool meets;
  };
  const Row rows[] = {
      {10.0, 4, true},                   // everything fits: least energy
      {4.0, 4, true},                    // boundary is inclusive
      {3.5, 3, true},                    // 700 J tie: the faster (2.5 s)
      {2.4, 0, true},                    // 2.0 s at 950 J beats 1.0 s at 1000 J
      {1.0, 1, true},  {0.5, 1, false},  // nothing meets it: the fastest, flagged
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.deadline_s);
    const DeadlineChoice choice = choose_for_deadline(frontier, row.deadline_s);
    EXPECT_EQ(choice.index, row.index);
    EXPECT_EQ(choice.meets_deadline, row.meets);
  }
}

TEST(Deadline, BadInputsAreNamed) {
  const std::vector<FrontierPoint> frontier = {{1.0, 1.0, "a"}};
  EXPECT_THROW((void)choose_for_deadline({}, 1.0), InputError);
  try {
    (void)choose_for_deadline(frontier, -2);
    FAIL();
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "deadline: the iteration-time deadline must be > 0 s, found -2");
  }
}

TEST(Deadline, NonFinitePointsAreRefusedNotChosen) {
  // A NaN time compares false with every deadline: it used to pass as meeting 3 s, with 1 J.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Row {
    FrontierPoint bad;
    const char* message;
  };
  const Row rows[] = {
      {{nan, 1, "n"},
       "deadline: frontier point 0 has time_s nan and energy_j 1: expected a finite time_s > 0 and "
       "energy_j >= 0"},
      {{1.5, inf, "i"},
       "deadline: frontier point 0 has time_s 1.5 and energy_j inf: expected a finite time_s > 0 "
       "and energy_j >= 0"},
      {{-1, 1, "m"},
       "deadline: frontier point 0 has time_s -1 and energy_j 1: expected a finite time_s > 0 and "
       "energy_j >= 0"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.bad.plan);
    const std::vector<FrontierPoint> frontier = {row.bad, {2.0, 5, "b"}};
    try {
      (void)choose_for_deadline(frontier, 3.0);
      FAIL() << "expected InputError";
    } catch (const InputError& error) {
      EXPECT_STREQ(error.what(), row.message);
    }
  }
}

}  // namespace
}  // namespace kareus::runtime
