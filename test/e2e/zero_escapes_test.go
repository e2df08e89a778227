package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/test/critest"
)

const (
	actedEnv        = "NRI_FAULTY_ACTED=guard"
	actedAnnotation = "nri-faulty.nrigate.io/acted"
)

// restartLoop runs nri-faulty as 10-guard, answering count CreateContainer
// requests per life and restarting it after each exit, until stop.
func restartLoop(d *daemon, count int, stop <-chan struct{}) (lives *atomic.Int64, done <-chan struct{}) {
	lives = &atomic.Int64{}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			cmd := exec.Command(faultyBin, "--name", "guard", "--idx", "10",
				"--socket", d.NRISock, "--mode", "exit-after", "--count", fmt.Sprint(count),
				"--fault-events", "CreateContainer", "--log-file", d.faultyLog())
			if err := cmd.Start(); err != nil {
				return
			}
			lives.Add(1)
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			select {
			case <-exited:
			case <-stop:
				_ = cmd.Process.Kill()
				<-exited
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return lives, ch
}

// acted reports whether the created container's spec carries the plugin's
// env var and annotation.
func acted(d *daemon, id string) bool {
	r, err := d.RT.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	Expect(err).NotTo(HaveOccurred())
	var info struct {
		RuntimeSpec struct {
			Process     struct{ Env []string } `json:"process"`
			Annotations map[string]string      `json:"annotations"`
		} `json:"runtimeSpec"`
	}
	Expect(json.Unmarshal([]byte(r.Info["info"]), &info)).To(Succeed())
	return slices.Contains(info.RuntimeSpec.Process.Env, actedEnv) && info.RuntimeSpec.Annotations[actedAnnotation] == "guard"
}

var _ = Describe("a required plugin restarting in a loop", func() {
	It("lets no container be created without its injection over 200 creations", func() {
		d := startDaemon(`[crio.nri.required_plugins."guard"]
fail_policy = "fail"
registration_wait = "10s"
`, false)
		stop := make(chan struct{})
		lives, done := restartLoop(d, 7, stop)
		defer func() { close(stop); <-done }()

		podID, podCfg := d.runPod("load")
		const total, workers = 200, 4
		var (
			mu       sync.Mutex
			created  []string
			refused  int
			otherErr []error
			wg       sync.WaitGroup
		)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for i := range total / workers {
					name := fmt.Sprintf("c%d-%d", w, i)
					r, err := d.RT.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
						PodSandboxId: podID, SandboxConfig: podCfg,
						Config: critest.ContainerConfig(name),
					})
					mu.Lock()
					switch {
					case err == nil:
						created = append(created, r.ContainerId)
					case status.Code(err) == codes.FailedPrecondition:
						refused++
					default:
						otherErr = append(otherErr, err)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		GinkgoWriter.Printf("created %d, refused %d, plugin lives %d\n", len(created), refused, lives.Load())
		if len(otherErr) > 0 {
			Fail(fmt.Sprintf("%d creations failed other than by a policy refusal, the first: %v", len(otherErr), otherErr[0]))
		}
		Expect(len(created) + refused).To(Equal(total))
		Expect(lives.Load()).To(BeNumerically(">", 5), "the plugin should have restarted many times")
		Expect(len(created)).To(BeNumerically(">", total/2))

		escapes := 0
		for _, id := range created {
			if !acted(d, id) {
				escapes++
			}
		}
		// One machine-readable line for make parity (hack/parity.sh).
		GinkgoWriter.Printf("PARITY restart-loop runtime=%s created=%d refused=%d escapes=%d lives=%d\n",
			e2eRuntime, len(created), refused, escapes, lives.Load())
		Expect(escapes).To(Equal(0), "containers created without the plugin's injection")

		// Refused creations leave nothing behind.
		l, err := d.RT.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Containers).To(HaveLen(len(created)))
	})
})
