from microgpt import Value

def test_smoke():
    a, b, c = Value(2.0), Value(-3.0), Value(10.0)
    y = (a + b) * c
    y.backward()
    assert (a.grad, b.grad, c.grad) == (10.0, 10.0, -1.0)
