package balance_test

import (
	"fmt"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
)

func ExampleNewSmoothWeighted() {
	p := balance.NewSmoothWeighted([]*endpoint.Endpoint{
		endpoint.New("10.0.0.1:80", 3),
		endpoint.New("10.0.0.2:80", 1),
		endpoint.New("10.0.0.3:80", 0), // drained: never picked
	})
	for range 8 {
		e, err := p.Pick()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(e.Address)
	}
	// Output:
	// 10.0.0.1:80
	// 10.0.0.1:80
	// 10.0.0.2:80
	// 10.0.0.1:80
	// 10.0.0.1:80
	// 10.0.0.1:80
	// 10.0.0.2:80
	// 10.0.0.1:80
}

func ExampleSmoothWeighted_Pick_noEndpoint() {
	p := balance.NewSmoothWeighted([]*endpoint.Endpoint{endpoint.New("10.0.0.1:80", 0)})
	_, err := p.Pick()
	fmt.Println(err)
	// Output: no available endpoint
}
