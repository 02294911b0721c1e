import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// The documented AuthState sequence of a sign-in (signingIn → awaitingDeviceCode → signedIn, or
/// failed), through the event callback and through `SignInFlow.states()`, and cancellation.
@Suite struct SignInStateTests {
    /// signingIn → awaitingDeviceCode(userCode, verificationURL) → signedIn(expiresAt).
    @Test(arguments: SignInRig.Kind.allCases)
    func successSequence(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 2 { try await rig.approve() } }
        let log = EventLog()
        _ = try await rig.manager(sleeper: sleeper).signIn(slot: nil, providerID: rig.providerID, events: log.record)
        let code = try #require(try await rig.server.lastUserCode())
        let url =
            kind == .openai
            ? rig.server.baseURL.appendingPathComponent("codex/device")
            : try #require(URL(string: rig.server.baseURL.absoluteString + "/device?user_code=" + code))
        #expect(
            log.states == [
                .signingIn, .awaitingDeviceCode(userCode: code, verificationURL: url),
                .signedIn(expiresAt: rig.home.clock.now() + 3600),
            ]
        )
        // The device code is announced (once) before the awaiting state, and a countdown before each wait.
        let names = log.events.map { event -> String in
            switch event {
            case .state(let s): return s.name
            case .deviceCode: return "code"
            case .waiting: return "waiting"
            case .slowedDown: return "slowed"
            case .retrying: return "retrying"
            case .shared: return "shared"
            case .storedInNewSlot: return "new-slot"
            case .browserAuthorization: return "browser"
            case .callbackRejected: return "rejected"
            }
        }
        #expect(names == ["signing-in", "code", "awaiting-device-code", "waiting", "waiting", "signed-in"])
    }

    /// signingIn → awaitingDeviceCode → failed(message) for a denial.
    @Test func failureSequence() async throws {
        let rig = try SignInRig.start(.openai)
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.deny() } }
        let log = EventLog()
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(slot: nil, providerID: "openai", events: log.record)
        }
        let code = try #require(log.deviceCode?.userCode)
        #expect(
            log.states == [
                .signingIn,
                .awaitingDeviceCode(
                    userCode: code,
                    verificationURL: rig.server.baseURL.appendingPathComponent("codex/device")
                ),
                .failed(try #require(error).localizedDescription),
            ]
        )
        #expect(error?.localizedDescription.hasPrefix("authorization denied") == true)
    }

    /// Cancelling the task that signs in: cancelledSignIn, the state goes back to signedOut, no
    /// further polls, nothing stored, the old credential kept.
    @Test(arguments: SignInRig.Kind.allCases)
    func cancellation(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let (slot, old) = try rig.home.seed("work", provider: rig.providerID)
        let before = try rig.home.snapshot()
        let parked = Signal()
        let sleeper = TestSleeper(clock: rig.home.clock) { call in
            if call == 2 {
                parked.fire()
                try await parkUntilCancelled()
            }
        }
        let log = EventLog()
        let manager = rig.manager(sleeper: sleeper)
        let task = Task { try await manager.signIn(slot: slot, providerID: rig.providerID, events: log.record) }
        await parked.wait()  // one pending poll done, waiting for the next
        task.cancel()
        let error = await authError { _ = try await task.value }
        #expect(error == .cancelledSignIn)
        #expect(error?.code == .cancelledSignIn)
        #expect(log.states.map(\.name) == ["signing-in", "awaiting-device-code", "signed-out"])
        // An approval after the cancellation changes nothing.
        try await rig.approve()
        #expect(try await rig.polls() == 1)
        #expect(try rig.home.snapshot() == before)
        #expect(try rig.home.store(.file).getInTest(slot) == old)
    }

    /// A sign-in cancelled before it starts requests no code.
    @Test func cancelledBeforeItStarts() async throws {
        let rig = try SignInRig.start(.openai)
        let manager = rig.manager(sleeper: TestSleeper(clock: rig.home.clock))
        let gate = Signal()
        let task = Task {
            await gate.wait()
            return try await manager.signIn(slot: nil, providerID: "openai", events: { _ in })
        }
        task.cancel()
        gate.fire()
        let error = await authError { _ = try await task.value }
        #expect(error == .cancelledSignIn)
        #expect(try await rig.server.stat("requests.usercode") == 0)
    }
}

/// `SignInFlow.states()`: the same sequence as an AsyncThrowingStream.
@Suite struct SignInStateStreamTests {
    func flow(_ rig: SignInRig, sleeper: TestSleeper) throws -> SignInFlow {
        SignInFlow(
            provider: try rig.manager(sleeper: sleeper).provider(rig.providerID),
            clock: rig.home.clock,
            sleeper: sleeper
        )
    }

    final class Box<T>: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [T] = []
        func append(_ item: T) { lock.withLock { items.append(item) } }
        var all: [T] { lock.withLock { items } }
    }

    @Test(arguments: SignInRig.Kind.allCases)
    func streamSuccessHandsOverTheTokensBeforeSignedIn(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let sleeper = TestSleeper(clock: rig.home.clock) { call in
            if call == 3 { try await rig.approve(["email": "gina@example.com"]) }
        }
        let trace = Box<String>()
        let stored = Box<(TokenResponse, AccountInfo)>()
        var states: [AuthState] = []
        for try await state in try flow(rig, sleeper: sleeper).states(onApproved: { tokens, account in
            trace.append("approved")
            stored.append((tokens, account))
        }) {
            trace.append(state.name)
            states.append(state)
        }
        #expect(trace.all == ["signing-in", "awaiting-device-code", "approved", "signed-in"])
        let (tokens, account) = try #require(stored.all.first)
        #expect(account.email == "gina@example.com")
        #expect(tokens.refreshToken != nil)
        #expect(states.last == .signedIn(expiresAt: rig.home.clock.now() + 3600))
        guard case .awaitingDeviceCode(let code, _)? = states.dropFirst().first else {
            Issue.record("no awaiting state")
            return
        }
        #expect(code == (try await rig.server.lastUserCode()))
        #expect(try await rig.polls() == 3)
    }

    @Test(arguments: SignInRig.Kind.allCases)
    func streamFailureEndsWithFailedThenThrows(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.expire() } }
        var states: [AuthState] = []
        var thrown: Error?
        do {
            for try await state in try flow(rig, sleeper: sleeper).states(onApproved: { _, _ in
                Issue.record("approved?")
            }) {
                states.append(state)
            }
        } catch { thrown = error }
        #expect(thrown as? AuthError == .expiredDeviceCode)
        #expect(states.map(\.name) == ["signing-in", "awaiting-device-code", "failed"])
        #expect(states.last == .failed(AuthError.expiredDeviceCode.localizedDescription))
    }

    /// A 401 from the token endpoint: the stream's last state is reauthenticationRequired.
    @Test func streamReauthenticationRequired() async throws {
        let rig = try SignInRig.start(.openai)
        try await rig.fault([
            "endpoint": "oauth_token", "type": "status", "status": 401, "body": ["error": "invalid_client"],
        ])
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve() } }
        var states: [AuthState] = []
        var thrown: Error?
        do {
            for try await state in try flow(rig, sleeper: sleeper).states() { states.append(state) }
        } catch { thrown = error }
        guard case .tokenExchangeFailed(401, _)? = thrown as? AuthError else {
            Issue.record("got \(String(describing: thrown))")
            return
        }
        #expect(states.last == .reauthenticationRequired)
    }

    /// When storing the tokens fails, the stream says failed and throws the store's error.
    @Test func streamStoreFailure() async throws {
        let rig = try SignInRig.start(.device)
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve() } }
        var states: [AuthState] = []
        var thrown: Error?
        do {
            for try await state in try flow(rig, sleeper: sleeper).states(onApproved: { _, _ in
                throw StoreError.locked(backend: "encrypted file", hint: "run `lanyard store unlock`")
            }) { states.append(state) }
        } catch { thrown = error }
        #expect(thrown as? StoreError == .locked(backend: "encrypted file", hint: "run `lanyard store unlock`"))
        #expect(states.last == .failed(try #require(thrown).localizedDescription))
        #expect(!states.contains { $0.name == "signed-in" })
    }

    /// Cancelling the task that iterates the stream cancels the sign-in itself: it stops polling
    /// and never hands over tokens.
    @Test func cancellingTheConsumerCancelsTheSignIn() async throws {
        let rig = try SignInRig.start(.openai)
        let parked = Signal()
        let unparked = Signal()
        let sleeper = TestSleeper(clock: rig.home.clock) { call in
            guard call == 2 else { return }
            parked.fire()
            do { try await parkUntilCancelled() } catch {
                unparked.fire()
                throw error
            }
        }
        let states = Box<AuthState>()
        let flow = try flow(rig, sleeper: sleeper)
        let consumer = Task {
            for try await state in flow.states(onApproved: { _, _ in Issue.record("tokens handed over after cancel") })
            {
                states.append(state)
            }
        }
        await parked.wait()
        consumer.cancel()
        await unparked.wait()  // the flow's own wait was cancelled
        _ = try? await consumer.value
        try await rig.approve()
        #expect(try await rig.polls() == 1)
        #expect(try await rig.server.stat("code_exchanges") == 0)
        #expect(states.all.map(\.name).prefix(2) == ["signing-in", "awaiting-device-code"])
        #expect(!states.all.contains { $0.name == "signed-in" })
    }
}
