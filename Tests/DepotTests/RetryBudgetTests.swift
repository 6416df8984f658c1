import Depot
import Testing

@Suite struct RetryBudgetTests {
    /// Withdraws `count` times at `time` and returns how many withdrawals went through.
    func withdraw(_ budget: inout RetryBudget, times count: Int = 1, at time: Duration) -> Int {
        var granted = 0
        for _ in 0..<count where budget.withdraw(at: time) { granted += 1 }
        return granted
    }

    @Test func startsFullAndRunsOut() {
        var budget = RetryBudget(capacity: 3)
        #expect(budget.available(at: .zero) == 3)
        let granted = withdraw(&budget, times: 4, at: .zero)
        #expect(granted == 3)
        #expect(budget.available(at: .seconds(100)) == 0)
    }

    @Test func tenSuccessesEarnOneRetry() {
        var budget = RetryBudget(capacity: 10)
        _ = withdraw(&budget, times: 10, at: .zero)
        for n in 1...9 { budget.recordSuccess(at: .seconds(n)) }
        let afterNine = withdraw(&budget, at: .seconds(10))
        #expect(afterNine == 0)
        budget.recordSuccess(at: .seconds(10))
        let afterTen = withdraw(&budget, times: 2, at: .seconds(10))
        #expect(afterTen == 1)
    }

    @Test func depositsStopAtCapacity() {
        var budget = RetryBudget(capacity: 2)
        for n in 0..<100 { budget.recordSuccess(at: .seconds(n)) }
        #expect(budget.available(at: .seconds(100)) == 2)
    }

    @Test func reserveRefillsWithTime() {
        var budget = RetryBudget(capacity: 0, minimumRetriesPerSecond: 2)
        let atStart = withdraw(&budget, times: 3, at: .zero)
        #expect(atStart == 2)
        let tooSoon = withdraw(&budget, at: .milliseconds(400))   // 0.8 of a token
        #expect(tooSoon == 0)
        let later = withdraw(&budget, at: .milliseconds(500))
        #expect(later == 1)
        // The reserve never holds more than one second's worth.
        #expect(budget.available(at: .seconds(60)) == 2)
    }

    @Test func gateTurnsARetryIntoARefusalWhenSpent() {
        var budget = RetryBudget(capacity: 1)
        let first = budget.gate(.retry(after: .seconds(1)), at: .zero)
        let second = budget.gate(.retry(after: .seconds(1)), at: .zero)
        let refusal = budget.gate(.doNotRetry(.notRetryable), at: .zero)
        #expect(first == .retry(after: .seconds(1)))
        #expect(second == .doNotRetry(.budgetExhausted))
        #expect(refusal == .doNotRetry(.notRetryable))
        let unlimited = RetryBudget.unlimited
        #expect(unlimited.available(at: .zero) == Int.max)
    }

    /// A setter cannot make what `init` refuses: negative amounts are zero.
    @Test func settersKeepTheInvariantsOfInit() {
        var budget = RetryBudget.default
        budget.capacity = -3
        budget.depositPerSuccess = -1
        budget.minimumRetriesPerSecond = -2
        #expect(budget.capacity == 0 && budget.depositPerSuccess == 0 && budget.minimumRetriesPerSecond == 0)
    }
}
