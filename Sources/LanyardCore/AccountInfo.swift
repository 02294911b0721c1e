import FoundationEssentials

/// Who a slot is signed in as. Not secret: derived from id-token claims and kept in the registry so
/// `list` and `status` run without unlocking anything.
public struct AccountInfo: Hashable, Sendable, JSONDocument {
    public var email: String?
    public var userID: String?
    public var accountID: String?
    public var plan: Plan?
    public var isFedRAMPAccount: Bool

    public init(email: String? = nil, userID: String? = nil, accountID: String? = nil, plan: Plan? = nil,
                isFedRAMPAccount: Bool = false) {
        self.email = email
        self.userID = userID
        self.accountID = accountID
        self.plan = plan
        self.isFedRAMPAccount = isFedRAMPAccount
    }

    public init(json: JSONFields) throws(JSONShapeError) {
        self.init(email: try json.optionalString("email"), userID: try json.optionalString("user_id"),
                  accountID: try json.optionalString("account_id"), plan: try json.optionalString("plan").map(Plan.init(rawValue:)),
                  isFedRAMPAccount: try json.optionalBool("fedramp") ?? false)
    }

    public var json: JSONValue {
        JSONValue.object(["email": .optional(email), "user_id": .optional(userID), "account_id": .optional(accountID),
                          "plan": .optional(plan?.rawValue), "fedramp": .bool(isFedRAMPAccount)]).droppingNulls
    }
}

extension AccountInfo {
    /// These fields, with gaps filled from `other` (whose plan, when it has one, wins: it is the
    /// later reading).
    public func merging(_ other: AccountInfo) -> AccountInfo {
        AccountInfo(email: email ?? other.email, userID: userID ?? other.userID, accountID: accountID ?? other.accountID,
                    plan: other.plan ?? plan, isFedRAMPAccount: isFedRAMPAccount || other.isFedRAMPAccount)
    }
}
