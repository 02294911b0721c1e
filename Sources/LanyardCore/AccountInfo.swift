import LanyardSupport

/// Who a slot is signed in as. Not secret: derived from id-token claims and kept in the registry so
/// `list` and `status` run without unlocking anything.
public struct AccountInfo: Hashable, Sendable, JSONDocument {
    public var email: String?
    public var userID: String?
    public var accountID: String?
    public var plan: Plan?
    public var isFedRAMPAccount: Bool

    public init(
        email: String? = nil,
        userID: String? = nil,
        accountID: String? = nil,
        plan: Plan? = nil,
        isFedRAMPAccount: Bool = false
    ) {
        self.email = email
        self.userID = userID
        self.accountID = accountID
        self.plan = plan
        self.isFedRAMPAccount = isFedRAMPAccount
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        self.init(
            email: try json.optionalString("email"),
            userID: try json.optionalString("user_id"),
            accountID: try json.optionalString("account_id"),
            plan: try json.optionalString("plan").map(Plan.init(rawValue:)),
            isFedRAMPAccount: try json.optionalBool("fedramp") ?? false
        )
    }

    public var json: JSONValue {
        JSONValue.object([
            "email": .optional(email), "user_id": .optional(userID), "account_id": .optional(accountID),
            "plan": .optional(plan?.rawValue), "fedramp": .bool(isFedRAMPAccount),
        ]).droppingNulls
    }
}

extension AccountInfo {
    /// Refuses account data read from outside (token claims, imported files) whose names could
    /// rewrite a terminal or break a header: each field must pass
    /// ``TerminalText/lineProblem(_:limit:)``. `place` names where the data came from.
    package func checkedOutsideText(place: String) throws(JSONShapeError) -> AccountInfo {
        for (name, value) in [
            ("email", email), ("user id", userID), ("account id", accountID), ("plan", plan?.rawValue),
        ] {
            if let value, let problem = TerminalText.lineProblem(value) {
                throw JSONShapeError(path: place, problem: "\(name) \(problem)")
            }
        }
        return self
    }

    /// These fields, with gaps filled from `other` (whose plan, when it has one, wins: it is the
    /// later reading).
    package func merging(_ other: AccountInfo) -> AccountInfo {
        AccountInfo(
            email: email ?? other.email,
            userID: userID ?? other.userID,
            accountID: accountID ?? other.accountID,
            plan: other.plan ?? plan,
            isFedRAMPAccount: isFedRAMPAccount || other.isFedRAMPAccount
        )
    }
}
