package contracttest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// callers is how many goroutines call the provider at once: the operator's
// three reconciles, its garbage-collection sweep and a spare (§1.3).
const callers = 5

// concurrentCallsAreSafe: one provider value serves concurrent callers
// (§1.3): Creates of one request race into exactly one instance, whose
// guest reads one racer's CloudInit whole (racers may carry different
// ones: two operator replicas of different versions), and no loser
// removes what the winner made; Creates of different requests, in every
// location, each make their own and each guest reads its own CloudInit;
// Gets and lists meanwhile see valid instances; concurrent Deletes of one
// instance all return nil. Run it under -race: the race detector is half
// the rule. A provider that keeps egress addresses races the Creates of
// one request in egressRaceRounds rounds: its racers meet at the address
// allocation only some of the time.
func concurrentCallsAreSafe(e *env) {
	rounds := 1
	if e.egressKeeper() != nil {
		rounds = egressRaceRounds
	}
	for range rounds {
		raceOneRequest(e)
	}
	raceManyRequests(e)
}

// egressRaceRounds: memprovider's egress-allocated-per-racer variant and
// its release-loop mutant were caught in 3 of 5 runs with one round.
const egressRaceRounds = 4

// raceOneRequest: racing Creates of one request make one instance, which
// a later Create returns, whose guest reads one racer's CloudInit whole,
// and leave one egress address for the replica, the one they report.
func raceOneRequest(e *env) {
	same := e.request()
	racers := make([]contract.CreateRequest, callers)
	for i := range racers {
		racers[i] = same
		racers[i].CloudInit = append(slices.Clone(same.CloudInit), fmt.Sprintf("# racer %d\n", i)...)
	}
	won := make([]contract.Instance, callers)
	ids := make([]string, callers)
	errs := make([]error, callers)
	e.race(callers, func(i int) {
		won[i], errs[i] = e.create(e.ctx(), e.p, racers[i])
		ids[i] = won[i].ProviderID
	})
	var winner string
	for i := range callers {
		switch {
		case errs[i] != nil && contract.ClassOf(errs[i]) != contract.ClassTransient:
			e.t.Errorf("racing Create of one request failed with class %s, want success or transient: %v", contract.ClassOf(errs[i]), errs[i])
		case errs[i] == nil && winner == "":
			winner = ids[i]
		case errs[i] == nil && ids[i] != winner:
			e.t.Errorf("racing Creates of one request returned %s and %s", winner, ids[i])
		}
	}
	final := e.mustCreate(racers[0])
	if winner != "" && final.ProviderID != winner {
		e.t.Errorf("Create after the race returned %s, the race returned %s", final.ProviderID, winner)
	}
	e.expectOne(same)
	e.checkUserDataOneOf(final.ProviderID, racers, "after racing Creates of one request")
	reported := []contract.Instance{final}
	for i := range callers {
		if errs[i] == nil {
			reported = append(reported, won[i])
		}
	}
	e.expectOneEgress(same, reported)
}

// raceManyRequests: Creates of different requests in every location,
// with lists meanwhile, then overlapping Deletes and rounds of calls on
// the instances gone.
func raceManyRequests(e *env) {
	errs := make([]error, callers)
	placements := e.placements()
	reqs := make([]contract.CreateRequest, callers)
	for i := range reqs {
		reqs[i] = e.requestIn(placements[i%len(placements)])
	}
	insts := make([]contract.Instance, callers)
	e.race(2*callers, func(i int) {
		if i < callers {
			insts[i], errs[i] = e.createRetrying(e.p, reqs[i])
			return
		}
		_, _ = e.list(e.ctx(), e.p, contract.LabelManaged, e.owner)
	})
	seen := map[string]bool{}
	for i := range callers {
		if errs[i] != nil {
			e.t.Errorf("concurrent Create of %s failed: %v", reqs[i].Name, errs[i])
			continue
		}
		if seen[insts[i].ProviderID] {
			e.t.Errorf("concurrent Creates of different requests both returned %s", insts[i].ProviderID)
		}
		seen[insts[i].ProviderID] = true
		if one := e.expectOne(reqs[i]); one.ProviderID != "" && one.ProviderID != insts[i].ProviderID {
			e.t.Errorf("Create of %s returned %s, but its UID marks %s", reqs[i].Name, insts[i].ProviderID, one.ProviderID)
		}
		e.checkUserData(insts[i].ProviderID, reqs[i], "after concurrent Creates of different requests")
	}

	for i := range callers {
		if errs[i] != nil {
			continue
		}
		id := insts[i].ProviderID
		delErrs := make([]error, 3)
		e.race(len(delErrs)+1, func(j int) {
			if j < len(delErrs) {
				delErrs[j] = e.delete(e.ctx(), e.p, id)
				return
			}
			_, _ = e.get(e.ctx(), e.p, id)
		})
		for _, err := range delErrs {
			if err != nil {
				e.t.Errorf("one of three overlapping Deletes of %s = %v, want nil", id, err)
			}
		}
		e.waitGone(e.p, id)
	}

	// The race detector sees a data race only where two goroutines meet
	// on the same memory with nothing ordering them; a lock the calls
	// share elsewhere (the backend's, a logger's) often orders them, so
	// one meeting is seen about four times in five. Rounds of every call
	// at once, on the instances now gone (cheap on any backend: a read
	// that finds nothing), give a cache no lock guards raceRounds more
	// chances (memprovider's unguarded-cache variant fails every one of
	// 20 runs).
	for range raceRounds {
		e.race(3*callers, func(i int) {
			id := insts[i%callers].ProviderID
			switch {
			case id == "":
			case i < callers:
				if err := e.delete(e.ctx(), e.p, id); err != nil {
					e.t.Errorf("Delete of %s, already gone, with other calls at once = %v, want nil", id, err)
				}
			case i < 2*callers:
				if _, err := e.get(e.ctx(), e.p, id); err != nil && !isNotFound(err) {
					e.t.Errorf("Get of %s, already gone, with other calls at once = %v, want ErrNotFound", id, err)
				}
			default:
				_, _ = e.list(e.ctx(), e.p, contract.LabelUID, reqs[i%callers].UID)
			}
		})
	}
}

// raceRounds is how many rounds of concurrent calls
// concurrentCallsAreSafe adds for the race detector.
const raceRounds = 10

// gatherFor is how long race waits for its racers to reach a Holder's
// stall: well inside any call budget, so no racer's call times out
// while held, and long past the start of a goroutine.
const gatherFor = 100 * time.Millisecond

// race runs call(0) … call(n-1) at once and waits for them. Against a
// Holder the calls start behind a stall, which is released once n calls
// are held (or after gatherFor, for a provider that queues its calls
// before the backend), so the racers meet at the backend even when the
// scheduler would have run them one after another.
func (e *env) race(n int, call func(i int)) {
	var wg sync.WaitGroup
	holder, ok := e.cfg.Backend.(Holder)
	release := func() {}
	if ok {
		release = holder.Stall()
	}
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			call(i)
		})
	}
	close(start)
	for deadline := time.Now().Add(gatherFor); ok && holder.Held() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
}

// createRetrying creates req with p, retrying transient errors (a clone
// still running, a lock) as the operator's back-off would.
func (e *env) createRetrying(p contract.Provider, req contract.CreateRequest) (contract.Instance, error) {
	var inst contract.Instance
	err := e.retryTransient(func() (err error) {
		inst, err = e.create(e.ctx(), p, req)
		return err
	})
	return inst, err
}

// retryTransient calls call until it returns nil or an error of a named
// class, or WaitTimeout has passed.
func (e *env) retryTransient(call func() error) error {
	deadline := time.Now().Add(e.cfg.WaitTimeout)
	for {
		err := call()
		if err == nil || contract.ClassOf(err) != contract.ClassTransient || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// expectOneEgress: a provider that keeps egress addresses holds one for
// req's replica after racing Creates, the one every Create that succeeded
// reported: two racers that each allocate one leave an address no
// instance carries, which the garbage collector then sees as the
// replica's too.
func (e *env) expectOneEgress(req contract.CreateRequest, created []contract.Instance) {
	e.t.Helper()
	keeper := e.egressKeeper()
	if keeper == nil {
		return
	}
	var held []string
	for _, eg := range e.listEgress(keeper) {
		if eg.Region == req.Placement.Region && eg.UID == req.UID && eg.Replica == req.Replica {
			held = append(held, eg.IP)
		}
	}
	for _, inst := range created {
		if len(held) != 1 || held[0] != inst.EgressIP {
			e.t.Errorf("after racing Creates of one request, ListEgress holds %v for its replica %d and a Create reported %q; want that one address alone, reported by every Create that succeeded", held, req.Replica, inst.EgressIP)
			return
		}
	}
}
