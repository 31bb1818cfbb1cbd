# Read by ctest after the discovered GoogleTest cases: the tests that take over ~1.5 s on the
# 2-core CI machine get the label `slow`, so `ctest -LE slow` is a quick run while
# scripts/test.sh (and so CI) runs them too, in a second call. Tests defined by add_test are
# labelled in tests/CMakeLists.txt.
set(kareus_slow_gtests
  Search.TenPercentBudgetFindsNearlyTheExhaustiveFront
  Search.SameSeedGivesTheSameEvaluationsAndFronts
  EvaluationLog.SearchResumesAfterSigkillWithoutLosingOrRepeatingAMeasurement
  PlanJob.KareusDominatesPerseusOnTheDefaultConfiguration
  PlanJob.PerseusAndNanobatchEndsMatchA100Runs
  PlanJob.PredictedMatchesAchievedAcrossTheFrontier
  EmulatorCalibration.OverlapFitPredictsEachConfigurationLeftOut
  EmulatorCalibration.OverlapFitRecoversParametersItWasGivenAndRejectsBadInput)
# (ctest ignores a name it does not know, so a renamed case only loses its label.)
set_tests_properties(${kareus_slow_gtests} PROPERTIES LABELS slow)
