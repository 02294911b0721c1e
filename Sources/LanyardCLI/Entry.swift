public func lanyardMain() -> Int32 { 0 }
