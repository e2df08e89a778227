package nripolicy

// OnWait makes p call f whenever an Admit starts waiting for a plugin, so
// that tests can start the plugin once a request waits instead of sleeping.
func OnWait(p *Policy, f func(Event)) { p.onWait = f }
