// Command frontdoor is a zone-aware front door for virtual desktop farms: GSLB DNS, an L4 proxy
// and secure gateway, and an embedded session broker in one binary.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // access rules' time zones, also on hosts without a zoneinfo database

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a graceful stop; a second one ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}

// newRootCmd builds the command tree; each subcommand lives in its own file.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "frontdoor",
		Short:         "A zone-aware front door for virtual desktop farms",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		newVersionCmd(),
		newConfigCmd(),
		newServeCmd(),
		newExplainCmd(),
		newLabCmd(),
		newResolveCmd(),
		newAgentCmd(),
		newAdminCmd(),
		newDrillCmd(),
		newConnectCmd(),
		newInitCmd(),
		newHashPasswordCmd(),
		newTOTPCmd(),
	)
	return root
}
